// Command assign runs Karmada v1.18.2's core.AssignReplicas on JSON cases from stdin
// and writes each result (or error) to stdout, for agreement.py.
package main

import (
	"encoding/json"
	"os"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/scheduler/core"
	"github.com/karmada-io/karmada/pkg/scheduler/core/spreadconstraint"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type Case struct {
	Strategy    string                       `json:"strategy"`
	Replicas    int32                        `json:"replicas"`
	Names       []string                     `json:"names"`
	Allocatable []int32                      `json:"allocatable"`
	Weights     map[string]int64             `json:"weights"`
	Previous    []workv1alpha2.TargetCluster `json:"previous"`
	UID         string                       `json:"uid"`
}

func main() {
	var cases []Case
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	out := []any{}
	for _, c := range cases {
		var candidates []spreadconstraint.ClusterDetailInfo
		for i, n := range c.Names {
			candidates = append(candidates, spreadconstraint.ClusterDetailInfo{Name: n, Cluster: &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: n}}, AllocatableReplicas: c.Allocatable[i]})
		}
		rs := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}
		switch c.Strategy {
		case "StaticWeight":
			rs.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
			wp := &policyv1alpha1.ClusterPreferences{}
			for n, w := range c.Weights {
				wp.StaticWeightList = append(wp.StaticWeightList, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{n}}, Weight: w})
			}
			rs.WeightPreference = wp
		case "DynamicWeight":
			rs.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
			rs.WeightPreference = &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}
		case "Aggregated":
			rs.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceAggregated
		}
		spec := &workv1alpha2.ResourceBindingSpec{
			Replicas:            c.Replicas,
			ReplicaRequirements: &workv1alpha2.ReplicaRequirements{},
			Placement:           &policyv1alpha1.Placement{ReplicaScheduling: rs},
			Resource:            workv1alpha2.ObjectReference{UID: types.UID(c.UID)},
		}
		spec.Clusters = c.Previous
		res, err := core.AssignReplicas(candidates, spec, &workv1alpha2.ResourceBindingStatus{})
		m := map[string]int32{}
		for _, t := range res {
			m[t.Name] = t.Replicas
		}
		if err != nil {
			out = append(out, map[string]any{"error": err.Error()})
		} else {
			out = append(out, map[string]any{"result": m})
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
