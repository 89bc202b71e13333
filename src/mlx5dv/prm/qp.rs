//! The QP context (`qpc`, its address path `ads`, rdma-core's `qpc_ext`)
//! and the QP state-transition and query commands.

use crate::mlx5dv::prm::field::layout;

layout! {
    /// Address path of a QP (`primary_address_path` in `qpc`): P_Key index,
    /// GID index, rate limit, `udp_sport` (RoCE v2 UDP source port), ...
    Ads = "ads", bits 0x160, kernel_bits 0x160;
    fields {
        "fl" fl set_fl 0x0 1 u32;
        "free_ar" free_ar set_free_ar 0x1 1 u32;
        "pkey_index" pkey_index set_pkey_index 0x10 16 u32;
        "grh" grh set_grh 0x28 1 u32;
        "mlid" mlid set_mlid 0x29 7 u32;
        "rlid" rlid set_rlid 0x30 16 u32;
        "ack_timeout" ack_timeout set_ack_timeout 0x40 5 u32;
        "src_addr_index" src_addr_index set_src_addr_index 0x48 8 u32;
        "stat_rate" stat_rate set_stat_rate 0x54 4 u32;
        "hop_limit" hop_limit set_hop_limit 0x58 8 u32;
        "tclass" tclass set_tclass 0x64 8 u32;
        "flow_label" flow_label set_flow_label 0x6c 20 u32;
        "f_dscp" f_dscp set_f_dscp 0x104 1 u32;
        "f_ecn" f_ecn set_f_ecn 0x105 1 u32;
        "f_eth_prio" f_eth_prio set_f_eth_prio 0x107 1 u32;
        "ecn" ecn set_ecn 0x108 2 u32;
        "dscp" dscp set_dscp 0x10a 6 u32;
        "udp_sport" udp_sport set_udp_sport 0x110 16 u32;
        "dei_cfi" dei_cfi set_dei_cfi 0x120 1 u32;
        "eth_prio" eth_prio set_eth_prio 0x121 3 u32;
        "sl" sl set_sl 0x124 4 u32;
        "vhca_port_num" vhca_port_num set_vhca_port_num 0x128 8 u32;
        "rmac_47_32" rmac_47_32 set_rmac_47_32 0x130 16 u32;
        "rmac_31_0" rmac_31_0 set_rmac_31_0 0x140 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// QP context: state, transport, queue sizes, PSNs, access flags,
    /// `lag_tx_port_affinity`, DCI stream counts, address paths, and the
    /// data-placement ordering bits `dp_ordering_force` and `dp_ordering_1`
    /// (out-of-order placement; from Linux 7.3's header, which alone of the
    /// checked ones has them).
    Qpc = "qpc", bits 0x740, kernel_bits 0x740;
    fields {
        "state" state set_state 0x0 4 u32;
        "lag_tx_port_affinity" lag_tx_port_affinity set_lag_tx_port_affinity 0x4 4 u32;
        "st" st set_st 0x8 8 u32;
        "isolate_vl_tc" isolate_vl_tc set_isolate_vl_tc 0x12 1 u32;
        "pm_state" pm_state set_pm_state 0x13 2 u32;
        "req_e2e_credit_mode" req_e2e_credit_mode set_req_e2e_credit_mode 0x16 2 u32;
        "offload_type" offload_type set_offload_type 0x18 4 u32;
        "end_padding_mode" end_padding_mode set_end_padding_mode 0x1c 2 u32;
        "wq_signature" wq_signature set_wq_signature 0x20 1 u32;
        "block_lb_mc" block_lb_mc set_block_lb_mc 0x21 1 u32;
        "atomic_like_write_en" atomic_like_write_en set_atomic_like_write_en 0x22 1 u32;
        "latency_sensitive" latency_sensitive set_latency_sensitive 0x23 1 u32;
        "drain_sigerr" drain_sigerr set_drain_sigerr 0x25 1 u32;
        "dp_ordering_force" dp_ordering_force set_dp_ordering_force 0x27 1 u32;
        "pd" pd set_pd 0x28 24 u32;
        "mtu" mtu set_mtu 0x40 3 u32;
        "log_msg_max" log_msg_max set_log_msg_max 0x43 5 u32;
        "log_rq_size" log_rq_size set_log_rq_size 0x49 4 u32;
        "log_rq_stride" log_rq_stride set_log_rq_stride 0x4d 3 u32;
        "no_sq" no_sq set_no_sq 0x50 1 u32;
        "log_sq_size" log_sq_size set_log_sq_size 0x51 4 u32;
        "ts_format" ts_format set_ts_format 0x58 2 u32;
        "data_in_order" data_in_order set_data_in_order 0x5a 1 u32;
        "rlky" rlky set_rlky 0x5b 1 u32;
        "ulp_stateless_offload_mode" ulp_stateless_offload_mode set_ulp_stateless_offload_mode 0x5c 4 u32;
        "counter_set_id" counter_set_id set_counter_set_id 0x60 8 u32;
        "uar_page" uar_page set_uar_page 0x68 24 u32;
        "user_index" user_index set_user_index 0x88 24 u32;
        "log_page_size" log_page_size set_log_page_size 0xa3 5 u32;
        "remote_qpn" remote_qpn set_remote_qpn 0xa8 24 u32;
        "log_ack_req_freq" log_ack_req_freq set_log_ack_req_freq 0x380 4 u32;
        "log_sra_max" log_sra_max set_log_sra_max 0x388 3 u32;
        "retry_count" retry_count set_retry_count 0x38d 3 u32;
        "rnr_retry" rnr_retry set_rnr_retry 0x390 3 u32;
        "fre" fre set_fre 0x394 1 u32;
        "cur_rnr_retry" cur_rnr_retry set_cur_rnr_retry 0x395 3 u32;
        "cur_retry_count" cur_retry_count set_cur_retry_count 0x398 3 u32;
        "next_send_psn" next_send_psn set_next_send_psn 0x3c8 24 u32;
        "log_num_dci_stream_channels" log_num_dci_stream_channels set_log_num_dci_stream_channels 0x3e3 5 u32;
        "cqn_snd" cqn_snd set_cqn_snd 0x3e8 24 u32;
        "log_num_dci_errored_streams" log_num_dci_errored_streams set_log_num_dci_errored_streams 0x403 5 u32;
        "deth_sqpn" deth_sqpn set_deth_sqpn 0x408 24 u32;
        "last_acked_psn" last_acked_psn set_last_acked_psn 0x448 24 u32;
        "ssn" ssn set_ssn 0x468 24 u32;
        "log_rra_max" log_rra_max set_log_rra_max 0x488 3 u32;
        "atomic_mode" atomic_mode set_atomic_mode 0x48c 4 u32;
        "rre" rre set_rre 0x490 1 u32;
        "rwe" rwe set_rwe 0x491 1 u32;
        "rae" rae set_rae 0x492 1 u32;
        "page_offset" page_offset set_page_offset 0x494 6 u32;
        "dp_ordering_1" dp_ordering_1 set_dp_ordering_1 0x49c 1 u32;
        "cd_slave_receive" cd_slave_receive set_cd_slave_receive 0x49d 1 u32;
        "cd_slave_send" cd_slave_send set_cd_slave_send 0x49e 1 u32;
        "cd_master" cd_master set_cd_master 0x49f 1 u32;
        "min_rnr_nak" min_rnr_nak set_min_rnr_nak 0x4a3 5 u32;
        "next_rcv_psn" next_rcv_psn set_next_rcv_psn 0x4a8 24 u32;
        "xrcd" xrcd set_xrcd 0x4c8 24 u32;
        "cqn_rcv" cqn_rcv set_cqn_rcv 0x4e8 24 u32;
        "dbr_addr" dbr_addr set_dbr_addr 0x500 64 u64;
        "q_key" q_key set_q_key 0x540 32 u32;
        "rq_type" rq_type set_rq_type 0x565 3 u32;
        "srqn_rmpn_xrqn" srqn_rmpn_xrqn set_srqn_rmpn_xrqn 0x568 24 u32;
        "rmsn" rmsn set_rmsn 0x588 24 u32;
        "hw_sq_wqebb_counter" hw_sq_wqebb_counter set_hw_sq_wqebb_counter 0x5a0 16 u32;
        "sw_sq_wqebb_counter" sw_sq_wqebb_counter set_sw_sq_wqebb_counter 0x5b0 16 u32;
        "hw_rq_counter" hw_rq_counter set_hw_rq_counter 0x5c0 32 u32;
        "sw_rq_counter" sw_rq_counter set_sw_rq_counter 0x5e0 32 u32;
        "cgs" cgs set_cgs 0x62f 1 u32;
        "cs_req" cs_req set_cs_req 0x630 8 u32;
        "cs_res" cs_res set_cs_res 0x638 8 u32;
        "dc_access_key" dc_access_key set_dc_access_key 0x640 64 u64;
        "dbr_umem_valid" dbr_umem_valid set_dbr_umem_valid 0x683 1 u32;
        "dbr_umem_id" dbr_umem_id set_dbr_umem_id 0x720 32 u32;
    }
    subs {
        "primary_address_path" primary_address_path primary_address_path_mut Ads 0xc0;
        "secondary_address_path" secondary_address_path secondary_address_path_mut Ads 0x220;
    }
    rdma_core ["data_in_order", "dbr_umem_id"]
    newest_kernel ["dp_ordering_force", "dp_ordering_1"]
}

layout! {
    /// QP context extension (`qpc_data_ext` of `rts2rts_qp_in`): the DCI
    /// stream to reset (`dci_stream_channel_id`), as `mlx5dv_dci_stream_id_reset`
    /// writes it. Not in Linux 6.1's header: from rdma-core v59's
    /// `providers/mlx5/mlx5_ifc.h`.
    QpcExt = "qpc_ext", bits 0x600, kernel_bits 0x0;
    fields {
        "mmo" mmo set_mmo 0x2 1 u32;
        "dci_stream_channel_id" dci_stream_channel_id set_dci_stream_channel_id 0x10 16 u32;
        "qos_queue_group_id_requester" qos_queue_group_id_requester set_qos_queue_group_id_requester 0x20 32 u32;
        "qos_queue_group_id_responder" qos_queue_group_id_responder set_qos_queue_group_id_responder 0x40 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `RST2INIT_QP` input: QP number, optional-parameter mask, QP context.
    Rst2initQpIn = "rst2init_qp_in", bits 0x880, kernel_bits 0x880;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "qpn" qpn set_qpn 0x48 24 u32;
        "opt_param_mask" opt_param_mask set_opt_param_mask 0x80 32 u32;
        "ece" ece set_ece 0xa0 32 u32;
    }
    subs {
        "qpc" qpc qpc_mut Qpc 0xc0;
    }
    rdma_core []
}

layout! {
    /// `RST2INIT_QP` output.
    Rst2initQpOut = "rst2init_qp_out", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "ece" ece set_ece 0x60 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `INIT2RTR_QP` input: QP number, optional-parameter mask, QP context.
    Init2rtrQpIn = "init2rtr_qp_in", bits 0x880, kernel_bits 0x880;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "qpn" qpn set_qpn 0x48 24 u32;
        "opt_param_mask" opt_param_mask set_opt_param_mask 0x80 32 u32;
        "ece" ece set_ece 0xa0 32 u32;
    }
    subs {
        "qpc" qpc qpc_mut Qpc 0xc0;
    }
    rdma_core []
}

layout! {
    /// `INIT2RTR_QP` output.
    Init2rtrQpOut = "init2rtr_qp_out", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "ece" ece set_ece 0x60 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `RTR2RTS_QP` input: QP number, optional-parameter mask, QP context.
    Rtr2rtsQpIn = "rtr2rts_qp_in", bits 0x880, kernel_bits 0x880;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "qpn" qpn set_qpn 0x48 24 u32;
        "opt_param_mask" opt_param_mask set_opt_param_mask 0x80 32 u32;
        "ece" ece set_ece 0xa0 32 u32;
    }
    subs {
        "qpc" qpc qpc_mut Qpc 0xc0;
    }
    rdma_core []
}

layout! {
    /// `RTR2RTS_QP` output.
    Rtr2rtsQpOut = "rtr2rts_qp_out", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "ece" ece set_ece 0x60 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `RTS2RTS_QP` input: QP number, optional-parameter mask, QP context; with
    /// rdma-core v59's extension (`qpc_ext`, `opt_param_mask_95_32`,
    /// `qpc_data_ext`) that `mlx5dv_dci_stream_id_reset` writes. The extension is
    /// not in Linux 6.1's header (its structure ends after `qpc`), so `BYTES` is
    /// rdma-core's size.
    Rts2rtsQpIn = "rts2rts_qp_in", bits 0xe80, kernel_bits 0x880;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "qpc_ext" qpc_ext set_qpc_ext 0x40 1 u32;
        "qpn" qpn set_qpn 0x48 24 u32;
        "opt_param_mask" opt_param_mask set_opt_param_mask 0x80 32 u32;
        "ece" ece set_ece 0xa0 32 u32;
        "opt_param_mask_95_32" opt_param_mask_95_32 set_opt_param_mask_95_32 0x840 64 u64;
    }
    subs {
        "qpc" qpc qpc_mut Qpc 0xc0;
        "qpc_data_ext" qpc_data_ext qpc_data_ext_mut QpcExt 0x880;
    }
    rdma_core ["qpc_ext", "opt_param_mask_95_32", "qpc_data_ext"]
}

layout! {
    /// `RTS2RTS_QP` output.
    Rts2rtsQpOut = "rts2rts_qp_out", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "ece" ece set_ece 0x60 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `QUERY_QP` input.
    QueryQpIn = "query_qp_in", bits 0x80, kernel_bits 0x80;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "qpn" qpn set_qpn 0x48 24 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `QUERY_QP` output: optional-parameter mask and the QP context (the
    /// trailing `pas` array is not part of the fixed structure).
    QueryQpOut = "query_qp_out", bits 0x880, kernel_bits 0x880;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "opt_param_mask" opt_param_mask set_opt_param_mask 0x80 32 u32;
        "ece" ece set_ece 0xa0 32 u32;
    }
    subs {
        "qpc" qpc qpc_mut Qpc 0xc0;
    }
    rdma_core []
}
