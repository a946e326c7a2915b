// Command spread runs Karmada v1.18.2's spreadconstraint.GroupClustersWithScore and
// SelectBestClusters on JSON cases from stdin and writes the selected clusters (or the
// error) to stdout, for agreement.py.
package main

import (
	"encoding/json"
	"os"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/scheduler/core/spreadconstraint"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type C struct {
	Name      string `json:"name"`
	Score     int64  `json:"score"`
	Available int32  `json:"available"`
	Region    string `json:"region"`
	Assigned  int32  `json:"assigned"`
}
type Case struct {
	Clusters    []C                               `json:"clusters"`
	Constraints []policyv1alpha1.SpreadConstraint `json:"constraints"`
	Replicas    int32                             `json:"replicas"`
	Duplicated  bool                              `json:"duplicated"`
}

func main() {
	var cases []Case
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	out := []any{}
	for _, c := range cases {
		avail := map[string]int32{}
		var scores framework.ClusterScoreList
		spec := &workv1alpha2.ResourceBindingSpec{Replicas: c.Replicas, ReplicaRequirements: &workv1alpha2.ReplicaRequirements{}}
		for _, cl := range c.Clusters {
			scores = append(scores, framework.ClusterScore{Cluster: &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cl.Name}, Spec: clusterv1alpha1.ClusterSpec{Region: cl.Region}}, Score: cl.Score})
			avail[cl.Name] = cl.Available
			if cl.Assigned > 0 {
				spec.Clusters = append(spec.Clusters, workv1alpha2.TargetCluster{Name: cl.Name, Replicas: cl.Assigned})
			}
		}
		rs := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}
		if !c.Duplicated {
			rs = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated}
		}
		placement := &policyv1alpha1.Placement{SpreadConstraints: c.Constraints, ReplicaScheduling: rs}
		spec.Placement = placement
		calc := func(clusters []*clusterv1alpha1.Cluster, _ *workv1alpha2.ResourceBindingSpec) []workv1alpha2.TargetCluster {
			res := make([]workv1alpha2.TargetCluster, len(clusters))
			for i, cl := range clusters {
				res[i] = workv1alpha2.TargetCluster{Name: cl.Name, Replicas: avail[cl.Name]}
			}
			return res
		}
		info := spreadconstraint.GroupClustersWithScore(scores, placement, spec, &workv1alpha2.ResourceBindingStatus{}, calc)
		sel, err := spreadconstraint.SelectBestClusters(placement, info, c.Replicas)
		if err != nil {
			out = append(out, map[string]any{"error": err.Error()})
			continue
		}
		names := []string{}
		for _, s := range sel {
			names = append(names, s.Name)
		}
		out = append(out, map[string]any{"result": names})
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
