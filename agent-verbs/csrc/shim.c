/* shim.c -- plain C functions over libibverbs for metaroce-agent-verbs.
 *
 * ibv_post_send, ibv_post_recv, ibv_poll_cq (and ibv_reg_mr, a macro in
 * rdma-core >= 28) are static inline in <infiniband/verbs.h>: Rust cannot
 * call them directly. These wrappers take and return only scalars, byte
 * arrays and the flat structs below (mirrored by #[repr(C)] structs in
 * src/ffi.rs), so the Rust side needs no binding of verbs' own structs.
 * Every function returns 0 or a positive errno; none aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>

struct mrv_dev_info {
  uint64_t max_mr_size;
  uint32_t max_msg_sz;
  uint32_t active_mtu; /* bytes */
  uint32_t max_qp_rd_atom;
  uint32_t max_qp_init_rd_atom;
  uint32_t atomic_cap;
  uint32_t max_qp_wr;
  uint32_t max_sge;
  uint32_t max_cqe;
  uint32_t port_state;
};

struct mrv_caps {
  uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge;
};

/* Attributes of ibv_modify_qp; `mask` says which are set (IBV_QP_* bits). */
struct mrv_qp_attr {
  int mask;
  uint32_t state;
  uint32_t access;
  uint16_t pkey_index;
  uint32_t qkey;
  uint32_t dest_qpn, rq_psn, sq_psn;
  uint32_t path_mtu; /* enum ibv_mtu */
  uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
  uint8_t max_rd_atomic, max_dest_rd_atomic;
  uint8_t dgid[16];
  uint8_t sgid_index, traffic_class, hop_limit, port_num;
};

struct mrv_sge {
  uint64_t addr;
  uint32_t length, lkey;
};

struct mrv_send {
  uint64_t wr_id;
  uint32_t opcode; /* enum ibv_wr_opcode */
  uint32_t flags;  /* IBV_SEND_* */
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t imm_be; /* already in network order */
  uint32_t invalidate_rkey;
  uint64_t compare_add, swap;
  struct ibv_ah *ah;
  uint32_t remote_qpn, remote_qkey;
};

struct mrv_wc {
  uint64_t wr_id;
  uint32_t status, opcode, qp_num, byte_len;
  uint32_t wc_flags, imm_or_inv, src_qp, vendor_err;
};

struct ibv_context *mrv_open(const char *name, int *err) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  struct ibv_context *ctx = NULL;
  *err = ENODEV;
  if (!list) { *err = errno ? errno : ENODEV; return NULL; }
  for (int i = 0; i < n; i++) {
    if (name == NULL || name[0] == 0 || strcmp(ibv_get_device_name(list[i]), name) == 0) {
      ctx = ibv_open_device(list[i]);
      *err = ctx ? 0 : (errno ? errno : EIO);
      break;
    }
  }
  ibv_free_device_list(list);
  return ctx;
}

int mrv_close(struct ibv_context *ctx) { return ibv_close_device(ctx) ? errno : 0; }

int mrv_query(struct ibv_context *ctx, uint8_t port, struct mrv_dev_info *out) {
  struct ibv_device_attr d;
  struct ibv_port_attr p;
  if (ibv_query_device(ctx, &d)) return errno ? errno : EIO;
  if (ibv_query_port(ctx, port, &p)) return errno ? errno : EIO;
  out->max_mr_size = d.max_mr_size;
  out->max_msg_sz = p.max_msg_sz;
  out->active_mtu = 128u << p.active_mtu;
  out->max_qp_rd_atom = d.max_qp_rd_atom;
  out->max_qp_init_rd_atom = d.max_qp_init_rd_atom;
  out->atomic_cap = d.atomic_cap;
  out->max_qp_wr = d.max_qp_wr;
  out->max_sge = d.max_sge;
  out->max_cqe = d.max_cqe;
  out->port_state = p.state;
  return 0;
}

struct ibv_pd *mrv_alloc_pd(struct ibv_context *ctx, int *err) {
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  *err = pd ? 0 : (errno ? errno : EIO);
  return pd;
}
int mrv_dealloc_pd(struct ibv_pd *pd) { return ibv_dealloc_pd(pd) ? (errno ? errno : EIO) : 0; }

struct ibv_mr *mrv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
                          uint32_t *lkey, uint32_t *rkey, int *err) {
  struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);
  if (!mr) { *err = errno ? errno : EIO; return NULL; }
  *lkey = mr->lkey; *rkey = mr->rkey; *err = 0;
  return mr;
}
int mrv_dereg_mr(struct ibv_mr *mr) { return ibv_dereg_mr(mr) ? (errno ? errno : EIO) : 0; }

struct ibv_cq *mrv_create_cq(struct ibv_context *ctx, int cqe, int *err) {
  struct ibv_cq *cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
  *err = cq ? 0 : (errno ? errno : EIO);
  return cq;
}
int mrv_destroy_cq(struct ibv_cq *cq) { return ibv_destroy_cq(cq) ? (errno ? errno : EIO) : 0; }

/* qp_type: enum ibv_qp_type (IBV_QPT_RC 2, IBV_QPT_UC 3, IBV_QPT_UD 4). */
struct ibv_qp *mrv_create_qp(struct ibv_pd *pd, int qp_type, struct ibv_cq *scq, struct ibv_cq *rcq,
                             int sq_sig_all, struct mrv_caps *caps, uint32_t *qpn, int *err) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.send_cq = scq; a.recv_cq = rcq; a.qp_type = qp_type; a.sq_sig_all = sq_sig_all;
  a.cap.max_send_wr = caps->max_send_wr; a.cap.max_recv_wr = caps->max_recv_wr;
  a.cap.max_send_sge = caps->max_send_sge; a.cap.max_recv_sge = caps->max_recv_sge;
  struct ibv_qp *qp = ibv_create_qp(pd, &a);
  if (!qp) { *err = errno ? errno : EIO; return NULL; }
  caps->max_send_wr = a.cap.max_send_wr; caps->max_recv_wr = a.cap.max_recv_wr;
  caps->max_send_sge = a.cap.max_send_sge; caps->max_recv_sge = a.cap.max_recv_sge;
  *qpn = qp->qp_num; *err = 0;
  return qp;
}
int mrv_destroy_qp(struct ibv_qp *qp) { return ibv_destroy_qp(qp) ? (errno ? errno : EIO) : 0; }

int mrv_modify_qp(struct ibv_qp *qp, const struct mrv_qp_attr *in) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = in->state;
  a.qp_access_flags = in->access;
  a.pkey_index = in->pkey_index;
  a.qkey = in->qkey;
  a.dest_qp_num = in->dest_qpn; a.rq_psn = in->rq_psn; a.sq_psn = in->sq_psn;
  a.path_mtu = in->path_mtu;
  a.timeout = in->timeout; a.retry_cnt = in->retry_cnt; a.rnr_retry = in->rnr_retry;
  a.min_rnr_timer = in->min_rnr_timer;
  a.max_rd_atomic = in->max_rd_atomic; a.max_dest_rd_atomic = in->max_dest_rd_atomic;
  a.port_num = in->port_num;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = in->port_num;
  memcpy(a.ah_attr.grh.dgid.raw, in->dgid, 16);
  a.ah_attr.grh.sgid_index = in->sgid_index;
  a.ah_attr.grh.traffic_class = in->traffic_class;
  a.ah_attr.grh.hop_limit = in->hop_limit;
  int rc = ibv_modify_qp(qp, &a, in->mask);
  return rc < 0 ? (errno ? errno : EIO) : rc;
}

int mrv_query_qp_state(struct ibv_qp *qp, uint32_t *state) {
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr i;
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &i)) return errno ? errno : EIO;
  *state = a.qp_state;
  return 0;
}

struct ibv_ah *mrv_create_ah(struct ibv_pd *pd, const uint8_t dgid[16], uint8_t sgid_index,
                             uint8_t port, int *err) {
  struct ibv_ah_attr a;
  memset(&a, 0, sizeof a);
  a.is_global = 1; a.port_num = port;
  memcpy(a.grh.dgid.raw, dgid, 16);
  a.grh.sgid_index = sgid_index; a.grh.hop_limit = 64;
  struct ibv_ah *ah = ibv_create_ah(pd, &a);
  *err = ah ? 0 : (errno ? errno : EIO);
  return ah;
}
int mrv_destroy_ah(struct ibv_ah *ah) { return ibv_destroy_ah(ah) ? (errno ? errno : EIO) : 0; }

int mrv_post_send(struct ibv_qp *qp, const struct mrv_send *s, const struct mrv_sge *sg, int nsge) {
  struct ibv_sge list[16];
  struct ibv_send_wr wr, *bad = NULL;
  if (nsge < 0 || nsge > 16) return EINVAL;
  for (int i = 0; i < nsge; i++) {
    list[i].addr = sg[i].addr; list[i].length = sg[i].length; list[i].lkey = sg[i].lkey;
  }
  memset(&wr, 0, sizeof wr);
  wr.wr_id = s->wr_id; wr.sg_list = list; wr.num_sge = nsge;
  wr.opcode = s->opcode; wr.send_flags = s->flags;
  switch (s->opcode) {
  case IBV_WR_SEND_WITH_IMM: wr.imm_data = s->imm_be; break;
  case IBV_WR_SEND_WITH_INV: wr.invalidate_rkey = s->invalidate_rkey; break;
  case IBV_WR_RDMA_WRITE_WITH_IMM: wr.imm_data = s->imm_be; /* fall through */
  case IBV_WR_RDMA_WRITE:
  case IBV_WR_RDMA_READ:
    wr.wr.rdma.remote_addr = s->remote_addr; wr.wr.rdma.rkey = s->rkey; break;
  case IBV_WR_ATOMIC_CMP_AND_SWP:
  case IBV_WR_ATOMIC_FETCH_AND_ADD:
    wr.wr.atomic.remote_addr = s->remote_addr; wr.wr.atomic.rkey = s->rkey;
    wr.wr.atomic.compare_add = s->compare_add; wr.wr.atomic.swap = s->swap; break;
  default: break;
  }
  if (s->ah) {
    wr.wr.ud.ah = s->ah; wr.wr.ud.remote_qpn = s->remote_qpn; wr.wr.ud.remote_qkey = s->remote_qkey;
  }
  return ibv_post_send(qp, &wr, &bad);
}

int mrv_post_recv(struct ibv_qp *qp, uint64_t wr_id, const struct mrv_sge *sg, int nsge) {
  struct ibv_sge list[16];
  struct ibv_recv_wr wr, *bad = NULL;
  if (nsge < 0 || nsge > 16) return EINVAL;
  for (int i = 0; i < nsge; i++) {
    list[i].addr = sg[i].addr; list[i].length = sg[i].length; list[i].lkey = sg[i].lkey;
  }
  memset(&wr, 0, sizeof wr);
  wr.wr_id = wr_id; wr.sg_list = list; wr.num_sge = nsge;
  return ibv_post_recv(qp, &wr, &bad);
}

/* Returns the number of completions (>= 0) or -errno. */
int mrv_poll_cq(struct ibv_cq *cq, int max, struct mrv_wc *out) {
  struct ibv_wc wc[64];
  if (max > 64) max = 64;
  int n = ibv_poll_cq(cq, max, wc);
  if (n < 0) return n;
  for (int i = 0; i < n; i++) {
    out[i].wr_id = wc[i].wr_id; out[i].status = wc[i].status; out[i].opcode = wc[i].opcode;
    out[i].qp_num = wc[i].qp_num; out[i].byte_len = wc[i].byte_len;
    out[i].wc_flags = wc[i].wc_flags; out[i].imm_or_inv = wc[i].imm_data;
    out[i].src_qp = wc[i].src_qp; out[i].vendor_err = wc[i].vendor_err;
  }
  return n;
}
