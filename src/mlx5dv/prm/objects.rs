//! UAR allocation, the general-object command headers, packet pacing,
//! scheduling elements, TIS and LAG contexts, and the event payloads.

use crate::mlx5dv::prm::field::layout;

layout! {
    /// `ALLOC_UAR` input.
    AllocUarIn = "alloc_uar_in", bits 0x80, kernel_bits 0x80;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `ALLOC_UAR` output: the UAR page index.
    AllocUarOut = "alloc_uar_out", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "uar" uar set_uar 0x48 24 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `DEALLOC_UAR` input.
    DeallocUarIn = "dealloc_uar_in", bits 0x80, kernel_bits 0x80;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "uar" uar set_uar 0x48 24 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// The header of the general-object commands (`CREATE_GENERAL_OBJECT`, ...):
    /// object type and id.
    GeneralObjInCmdHdr = "general_obj_in_cmd_hdr", bits 0x80, kernel_bits 0x80;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "vhca_tunnel_id" vhca_tunnel_id set_vhca_tunnel_id 0x20 16 u32;
        "obj_type" obj_type set_obj_type 0x30 16 u32;
        "obj_id" obj_id set_obj_id 0x40 32 u32;
        "log_obj_range" log_obj_range set_log_obj_range 0x63 5 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// The output header of the general-object commands: the object id.
    GeneralObjOutCmdHdr = "general_obj_out_cmd_hdr", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "obj_id" obj_id set_obj_id 0x40 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// Packet pacing rate limit context (`SET_PP_RATE_LIMIT`): rate, burst
    /// upper bound, typical packet size.
    SetPpRateLimitContext = "set_pp_rate_limit_context", bits 0x180, kernel_bits 0x180;
    fields {
        "rate_limit" rate_limit set_rate_limit 0x0 32 u32;
        "burst_upper_bound" burst_upper_bound set_burst_upper_bound 0x20 32 u32;
        "typical_packet_size" typical_packet_size set_typical_packet_size 0x50 16 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `SET_PP_RATE_LIMIT` input: the rate limit index and its context.
    SetPpRateLimitIn = "set_pp_rate_limit_in", bits 0x200, kernel_bits 0x200;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "rate_limit_index" rate_limit_index set_rate_limit_index 0x50 16 u32;
    }
    subs {
        "ctx" ctx ctx_mut SetPpRateLimitContext 0x80;
    }
    rdma_core []
}

layout! {
    /// `SET_PP_RATE_LIMIT` output.
    SetPpRateLimitOut = "set_pp_rate_limit_out", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// Scheduling element context: element type, parent, bandwidth share,
    /// maximum average bandwidth.
    SchedulingContext = "scheduling_context", bits 0x200, kernel_bits 0x200;
    fields {
        "element_type" element_type set_element_type 0x0 8 u32;
        "element_attributes" element_attributes set_element_attributes 0x20 32 u32;
        "parent_element_id" parent_element_id set_parent_element_id 0x40 32 u32;
        "bw_share" bw_share set_bw_share 0xa0 32 u32;
        "max_average_bw" max_average_bw set_max_average_bw 0xc0 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `CREATE_SCHEDULING_ELEMENT` input: hierarchy and the element's context.
    CreateSchedulingElementIn = "create_scheduling_element_in", bits 0x400, kernel_bits 0x400;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "scheduling_hierarchy" scheduling_hierarchy set_scheduling_hierarchy 0x40 8 u32;
    }
    subs {
        "scheduling_context" scheduling_context scheduling_context_mut SchedulingContext 0x100;
    }
    rdma_core []
}

layout! {
    /// `CREATE_SCHEDULING_ELEMENT` output: the element id.
    CreateSchedulingElementOut = "create_scheduling_element_out", bits 0x200, kernel_bits 0x200;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "scheduling_element_id" scheduling_element_id set_scheduling_element_id 0x80 32 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// Transport interface send context: `lag_tx_port_affinity`, priority,
    /// transport domain.
    Tisc = "tisc", bits 0x500, kernel_bits 0x500;
    fields {
        "strict_lag_tx_port_affinity" strict_lag_tx_port_affinity set_strict_lag_tx_port_affinity 0x0 1 u32;
        "tls_en" tls_en set_tls_en 0x1 1 u32;
        "lag_tx_port_affinity" lag_tx_port_affinity set_lag_tx_port_affinity 0x4 4 u32;
        "prio" prio set_prio 0xc 4 u32;
        "transport_domain" transport_domain set_transport_domain 0x128 24 u32;
        "underlay_qpn" underlay_qpn set_underlay_qpn 0x148 24 u32;
        "pd" pd set_pd 0x168 24 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `CREATE_TIS` input: the TIS context.
    CreateTisIn = "create_tis_in", bits 0x600, kernel_bits 0x600;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
    }
    subs {
        "ctx" ctx ctx_mut Tisc 0x100;
    }
    rdma_core []
}

layout! {
    /// `MODIFY_TIS` input: the fields to modify and the TIS context.
    ModifyTisIn = "modify_tis_in", bits 0x600, kernel_bits 0x600;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "tisn" tisn set_tisn 0x48 24 u32;
    }
    subs {
        "ctx" ctx ctx_mut Tisc 0x100;
    }
    rdma_core []
}

layout! {
    /// LAG context: port mapping (`tx_remap_affinity_1` / `_2`), mode.
    Lagc = "lagc", bits 0x40, kernel_bits 0x40;
    fields {
        "fdb_selection_mode" fdb_selection_mode set_fdb_selection_mode 0x0 1 u32;
        "port_select_mode" port_select_mode set_port_select_mode 0x15 3 u32;
        "lag_state" lag_state set_lag_state 0x1d 3 u32;
        "active_port" active_port set_active_port 0x2c 4 u32;
        "tx_remap_affinity_2" tx_remap_affinity_2 set_tx_remap_affinity_2 0x34 4 u32;
        "tx_remap_affinity_1" tx_remap_affinity_1 set_tx_remap_affinity_1 0x3c 4 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `CREATE_LAG` input: the LAG context.
    CreateLagIn = "create_lag_in", bits 0x80, kernel_bits 0x80;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
    }
    subs {
        "ctx" ctx ctx_mut Lagc 0x40;
    }
    rdma_core []
}

layout! {
    /// `MODIFY_LAG` input: the fields to modify and the LAG context.
    ModifyLagIn = "modify_lag_in", bits 0xc0, kernel_bits 0xc0;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "field_select" field_select set_field_select 0x60 32 u32;
    }
    subs {
        "ctx" ctx ctx_mut Lagc 0x80;
    }
    rdma_core []
}

layout! {
    /// Completion event payload (EQE data): the CQ number.
    CompEvent = "comp_event", bits 0xe0, kernel_bits 0xe0;
    fields {
        "cq_number" cq_number set_cq_number 0xc8 24 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// QP/SRQ affiliated event payload: the QP or SRQ number and its type.
    QpEvents = "qp_events", bits 0xe0, kernel_bits 0xe0;
    fields {
        "type" r#type set_type 0xa0 8 u32;
        "qpn_rqn_sqn" qpn_rqn_sqn set_qpn_rqn_sqn 0xc8 24 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// Header of an affiliated event: object type and id.
    AffiliatedEventHeader = "affiliated_event_header", bits 0x40, kernel_bits 0x40;
    fields {
        "obj_type" obj_type set_obj_type 0x10 16 u32;
        "obj_id" obj_id set_obj_id 0x20 32 u32;
    }
    subs {
    }
    rdma_core []
}
