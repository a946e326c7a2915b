"""The runtime API parsers on replies captured from HAProxy 2.6.12 (pure, no HAProxy)."""

from __future__ import annotations

import pytest

from clusterhealth_mci.providers.haproxy import runtime

SERVERS_STATE = (
    "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight "
    "srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health "
    "srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord "
    "srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n"
    "5 mci_slot_0 1 s1 10.0.0.7 2 4 128 1 0 1 0 0 8 0 0 0 - 8080 - 0 0 - - 0\n"
    "5 mci_slot_0 2 s2 10.0.0.8 2 12 1 1 0 1 0 0 8 0 0 0 - 8080 - 0 0 - - 0\n"
    "6 mci_slot_1 1 s1 0.0.0.0 0 5 1 1 0 1 0 0 8 0 0 0 - 1 - 0 0 - - 0\n"
    "6 mci_slot_1 2 s2 :: 0 1 1 1 0 1 0 0 8 0 0 0 - 1 - 0 0 - - 0\n\n"
)

STAT_HEADER = (
    "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,"
    "wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,"
    "lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,check_duration,hrsp_1xx,"
    "hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,req_rate,req_rate_max,req_tot,"
    "cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,lastsess,last_chk,last_agt,qtime,"
    "ctime,rtime,ttime,agent_status,agent_code,agent_duration,check_desc,agent_desc,check_rise,"
    "check_fall,check_health,agent_rise,agent_fall,agent_health,addr,cookie,mode,algo,conn_rate,"
    "conn_rate_max,conn_tot,intercepted,dcon,dses,wrew,connect,reuse,cache_lookups,cache_hits,"
    "srv_icur,src_ilim,qtime_max,ctime_max,rtime_max,ttime_max,eint,idle_conn_cur,safe_conn_cur,"
    "used_conn_cur,need_conn_est,uweight,agg_server_status,agg_server_check_status,"
    "agg_check_status,-,ssl_sess,ssl_reused_sess,ssl_failed_handshake,h2_headers_rcvd,"
    "h2_data_rcvd,h2_settings_rcvd,h2_rst_stream_rcvd,h2_goaway_rcvd,"
    "h2_detected_conn_protocol_errors,h2_detected_strm_protocol_errors,h2_rst_stream_resp,"
    "h2_goaway_resp,h2_open_connections,h2_backend_open_streams,h2_total_connections,"
    "h2_backend_total_streams,h1_open_connections,h1_open_streams,h1_total_connections,"
    "h1_total_streams,h1_bytes_in,h1_bytes_out,h1_spliced_bytes_in,h1_spliced_bytes_out,\n"
)
STAT = STAT_HEADER + (
    "mci_slot_0,s1,0,0,0,0,,0,0,0,,0,,0,0,0,0,no check,128,1,0,,,0,,,1,5,1,,0,,2,0,,0,,,,0,0,"
    "0,0,0,0,,,,0,0,0,,,,,-1,,,0,0,0,0,,,,,,,,,,,,10.0.0.7:8080,,http,,,,,,,,0,0,0,,,0,,0,0,0,"
    "0,0,0,0,0,0,128,,,,-,0,0,0,,,,,,,,,,,,,,,,,,,,,,\n"
    "mci_slot_0,s2,1,2,3,5,,17,0,0,,0,,0,0,0,0,DRAIN,1,1,0,,,0,,,1,5,2,,0,,2,0,,0,,,,0,0,0,0,"
    "0,0,,,,0,0,0,,,,,-1,,,0,0,0,0,,,,,,,,,,,,10.0.0.8:8080,,http,,,,,,,,0,0,0,,,0,,0,0,0,0,0,"
    "0,0,0,0,1,,,,-,0,0,0,,,,,,,,,,,,,,,,,,,,,,\n\n"
)

MAP = "0x7f6b880465d0 shop.example.com/api mci_slot_0\n0x55e86827f780 /health mci_slot_1\n\n"

INFO = ("Name: HAProxy\nVersion: 2.6.12-1+deb12u4\nNbthread: 2\nPid: 26114\nUptime: 0d 0h00m00s\n"
        "Uptime_sec: 0\nnode: vm\nUnstoppable Jobs: 0\nBuild info: 2.6.12-1+deb12u4\n"
        "Start_time_sec: 1795307353\nTainted: 0\n\n")


def test_show_info() -> None:
    info = runtime.parse_info(INFO)
    assert info["Pid"] == "26114"
    assert info["Start_time_sec"] == "1795307353"
    assert info["Unstoppable Jobs"] == "0"
    assert info["Uptime"] == "0d 0h00m00s"


def test_show_servers_state() -> None:
    states = runtime.parse_servers_state(SERVERS_STATE)
    assert [(s.backend, s.server, s.address, s.port, s.weight, s.mode) for s in states] == [
        ("mci_slot_0", "s1", "10.0.0.7", 8080, 128, "ready"),  # admin 4: CMAINT left over
        ("mci_slot_0", "s2", "10.0.0.8", 8080, 1, "drain"),  # admin 12: CMAINT | FDRAIN
        ("mci_slot_1", "s1", "0.0.0.0", 1, 1, "maint"),  # admin 5: CMAINT | FMAINT
        ("mci_slot_1", "s2", "::", 1, 1, "maint"),  # admin 1: FMAINT
    ]
    assert states[0].op_state == 2
    assert states[3].server_id == 2


@pytest.mark.parametrize("text", ["", "2\n# be_id be_name\n", "1\n# be_id be_name srv_id\n5 x y\n"])
def test_show_servers_state_rejects_unknown_formats(text: str) -> None:
    with pytest.raises(runtime.RuntimeApiError):
        runtime.parse_servers_state(text)


def test_show_stat() -> None:
    rows = runtime.parse_stat(STAT)
    assert [(r.proxy, r.name, r.queued, r.sessions, r.status, r.weight, r.total) for r in rows] == [
        ("mci_slot_0", "s1", 0, 0, "no check", 128, 0),
        ("mci_slot_0", "s2", 1, 3, "DRAIN", 1, 17),
    ]


def test_show_stat_needs_its_header() -> None:
    with pytest.raises(runtime.RuntimeApiError):
        runtime.parse_stat("No such proxy.\n")


def test_show_map() -> None:
    assert runtime.parse_map(MAP) == [
        runtime.MapEntry("0x7f6b880465d0", "shop.example.com/api", "mci_slot_0"),
        runtime.MapEntry("0x55e86827f780", "/health", "mci_slot_1"),
    ]
    assert runtime.parse_map("\n") == []
    with pytest.raises(runtime.RuntimeApiError):
        runtime.parse_map("garbage\n")


@pytest.mark.parametrize(("command", "reply"), [
    ("set server mci_slot_0/s9 state ready", "No such server.\n"),
    ("set server nope/s1 state ready", "No such backend.\n"),
    ("set server mci_slot_0/s1 weight 257", "Absolute weight can only be between 0 and 256 "
                                            "inclusive.\n"),
    ("del map /m/exact.map nokey", "Key not found.\n"),
    ("set map /m/exact.map nokey x", "entry not found.\n"),
    ("show map /nonexist.map", "Unknown map identifier. Please use #<id> or <file>.\n"),
])
def test_error_replies_are_errors(command: str, reply: str) -> None:
    with pytest.raises(runtime.RuntimeApiError) as caught:
        runtime.expect_empty(command, reply)
    assert caught.value.command == command
    assert reply.strip() in str(caught.value)


def test_set_server_addr_replies() -> None:
    runtime.expect_addr_changed("c", "IP changed from '0.0.0.0' to '10.0.0.7', port changed from "
                                     "'1' to '8080' by 'stats socket command'\n")
    runtime.expect_addr_changed("c", "no need to change the addr, no need to change the port by "
                                     "'stats socket command'\n")
    runtime.expect_addr_changed("c", "no need to change the addr, port changed from '1' to '80' by "
                                     "'stats socket command'\n")
    with pytest.raises(runtime.RuntimeApiError):
        runtime.expect_addr_changed("c", "Invalid addr '1.2.3.x' by 'stats socket command'\n")
    runtime.expect_empty("c", "\n")


def test_escape() -> None:
    assert runtime.escape("a;b") == r"a\;b"
    assert runtime.escape("a\\b") == r"a\\b"
    assert runtime.escape("a b") == r"a\ b"
    with pytest.raises(runtime.RuntimeApiError):
        runtime.escape("a\nb")
    with pytest.raises(runtime.RuntimeApiError):
        runtime.escape("")


@pytest.mark.parametrize(("address", "parsed"), [
    ("/run/haproxy/admin.sock", "/run/haproxy/admin.sock"),
    ("unix@/run/haproxy/admin.sock", "/run/haproxy/admin.sock"),
    ("127.0.0.1:9999", ("127.0.0.1", 9999)),
    ("ipv4@127.0.0.1:9999", ("127.0.0.1", 9999)),
    ("[::1]:9999", ("::1", 9999)),
    ("haproxy.kube-system:9999", ("haproxy.kube-system", 9999)),
    ("relative/admin.sock", "relative/admin.sock"),
])
def test_parse_address(address: str, parsed: object) -> None:
    assert runtime.parse_address(address) == parsed
