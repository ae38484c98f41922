# Run by guest_verbs_stall.sh in VM1's roshmd (gdb -p): every inbound QP
# from node vm2 goes to the error state, with nothing sent to vm2, as a
# responder QP does when it refuses a WR and its NAK is lost.
set pagination off
set $v = (struct rd_verbs_ctl *) rd_verbs_provider.ctl_priv
set $a = (struct ibv_qp_attr *) malloc(sizeof(struct ibv_qp_attr))
call (void *) memset($a, 0, sizeof(struct ibv_qp_attr))
set $a->qp_state = IBV_QPS_ERR
set $in = $v->inbound
set $n = 0
while $in
  if $in->id && $in->id->qp && $_streq($in->node, "vm2")
    printf "stalled: inbound QP %u of node %s: ibv_modify_qp(ERR) = %d\n", $in->id->qp->qp_num, $in->node, (int) ibv_modify_qp($in->id->qp, $a, 1)
    set $n = $n + 1
  end
  set $in = $in->next
end
printf "stalled: %d inbound QP(s)\n", $n
