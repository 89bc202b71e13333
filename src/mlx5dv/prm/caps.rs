//! `QUERY_HCA_CAP` and the capability groups it returns: the general
//! device capabilities (`cmd_hca_cap`, `cmd_hca_cap_2`), atomics, Ethernet
//! offloads, ODP, RoCE and QoS.

use crate::mlx5dv::prm::field::layout;

layout! {
    /// `QUERY_HCA_CAP` input: `opcode` [`Opcode::QUERY_HCA_CAP`](crate::mlx5dv::prm::Opcode::QUERY_HCA_CAP),
    /// `op_mod` from [`CapType::op_mod`](crate::mlx5dv::prm::CapType::op_mod).
    QueryHcaCapIn = "query_hca_cap_in", bits 0x80, kernel_bits 0x80;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "other_function" other_function set_other_function 0x40 1 u32;
        "function_id" function_id set_function_id 0x50 16 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `QUERY_HCA_CAP` output: status, syndrome, and the capability group asked
    /// for in `capability` (a union: one accessor per group).
    QueryHcaCapOut = "query_hca_cap_out", bits 0x8080, kernel_bits 0x8080;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
    }
    subs {
        "capability.cmd_hca_cap" cmd_hca_cap cmd_hca_cap_mut CmdHcaCap 0x80;
        "capability.cmd_hca_cap_2" cmd_hca_cap_2 cmd_hca_cap_2_mut CmdHcaCap2 0x80;
        "capability.odp_cap" odp_cap odp_cap_mut OdpCap 0x80;
        "capability.atomic_caps" atomic_caps atomic_caps_mut AtomicCaps 0x80;
        "capability.roce_cap" roce_cap roce_cap_mut RoceCap 0x80;
        "capability.per_protocol_networking_offload_caps" per_protocol_networking_offload_caps per_protocol_networking_offload_caps_mut PerProtocolNetworkingOffloadCaps 0x80;
        "capability.qos_cap" qos_cap qos_cap_mut QosCap 0x80;
    }
    rdma_core []
}

layout! {
    /// General device capabilities ([`CapType::GENERAL`](crate::mlx5dv::prm::CapType::GENERAL)):
    /// queue and key limits (`log_max_qp`, `log_max_cq`, `log_max_mkey`, ...),
    /// transports (`dct`, DCI streams), `atomic`, `roce`, `tag_matching`,
    /// `lag_tx_port_affinity`, `packet_pacing`, `qos`, `port_type`, `num_ports`.
    CmdHcaCap = "cmd_hca_cap", bits 0x800, kernel_bits 0x800;
    fields {
        "access_other_hca_roce" access_other_hca_roce set_access_other_hca_roce 0x0 1 u32;
        "shared_object_to_user_object_allowed" shared_object_to_user_object_allowed set_shared_object_to_user_object_allowed 0x10 1 u32;
        "vhca_resource_manager" vhca_resource_manager set_vhca_resource_manager 0x1f 1 u32;
        "hca_cap_2" hca_cap_2 set_hca_cap_2 0x20 1 u32;
        "create_lag_when_not_master_up" create_lag_when_not_master_up set_create_lag_when_not_master_up 0x21 1 u32;
        "dtor" dtor set_dtor 0x22 1 u32;
        "event_on_vhca_state_teardown_request" event_on_vhca_state_teardown_request set_event_on_vhca_state_teardown_request 0x23 1 u32;
        "event_on_vhca_state_in_use" event_on_vhca_state_in_use set_event_on_vhca_state_in_use 0x24 1 u32;
        "event_on_vhca_state_active" event_on_vhca_state_active set_event_on_vhca_state_active 0x25 1 u32;
        "event_on_vhca_state_allocated" event_on_vhca_state_allocated set_event_on_vhca_state_allocated 0x26 1 u32;
        "event_on_vhca_state_invalid" event_on_vhca_state_invalid set_event_on_vhca_state_invalid 0x27 1 u32;
        "vhca_id" vhca_id set_vhca_id 0x30 16 u32;
        "qp_data_in_order" qp_data_in_order set_qp_data_in_order 0x62 1 u32;
        "log_dma_mmo_max_size" log_dma_mmo_max_size set_log_dma_mmo_max_size 0x6b 5 u32;
        "log_max_srq_sz" log_max_srq_sz set_log_max_srq_sz 0x80 8 u32;
        "log_max_qp_sz" log_max_qp_sz set_log_max_qp_sz 0x88 8 u32;
        "event_cap" event_cap set_event_cap 0x90 1 u32;
        "isolate_vl_tc_new" isolate_vl_tc_new set_isolate_vl_tc_new 0x93 1 u32;
        "prio_tag_required" prio_tag_required set_prio_tag_required 0x98 1 u32;
        "log_max_qp" log_max_qp set_log_max_qp 0x9b 5 u32;
        "ece_support" ece_support set_ece_support 0xa3 1 u32;
        "reg_c_preserve" reg_c_preserve set_reg_c_preserve 0xa9 1 u32;
        "log_max_srq" log_max_srq set_log_max_srq 0xab 5 u32;
        "uplink_follow" uplink_follow set_uplink_follow 0xb1 1 u32;
        "ts_cqe_to_dest_cqn" ts_cqe_to_dest_cqn set_ts_cqe_to_dest_cqn 0xb2 1 u32;
        "shampo" shampo set_shampo 0xba 1 u32;
        "max_sgl_for_optimized_performance" max_sgl_for_optimized_performance set_max_sgl_for_optimized_performance 0xc0 8 u32;
        "log_max_cq_sz" log_max_cq_sz set_log_max_cq_sz 0xc8 8 u32;
        "relaxed_ordering_write_umr" relaxed_ordering_write_umr set_relaxed_ordering_write_umr 0xd0 1 u32;
        "relaxed_ordering_read_umr" relaxed_ordering_read_umr set_relaxed_ordering_read_umr 0xd1 1 u32;
        "virtio_net_device_emualtion_manager" virtio_net_device_emualtion_manager set_virtio_net_device_emualtion_manager 0xd9 1 u32;
        "virtio_blk_device_emualtion_manager" virtio_blk_device_emualtion_manager set_virtio_blk_device_emualtion_manager 0xda 1 u32;
        "log_max_cq" log_max_cq set_log_max_cq 0xdb 5 u32;
        "log_max_eq_sz" log_max_eq_sz set_log_max_eq_sz 0xe0 8 u32;
        "relaxed_ordering_write" relaxed_ordering_write set_relaxed_ordering_write 0xe8 1 u32;
        "relaxed_ordering_read" relaxed_ordering_read set_relaxed_ordering_read 0xe9 1 u32;
        "log_max_mkey" log_max_mkey set_log_max_mkey 0xea 6 u32;
        "tunneled_atomic" tunneled_atomic set_tunneled_atomic 0xf0 1 u32;
        "as_notify" as_notify set_as_notify 0xf1 1 u32;
        "m_pci_port" m_pci_port set_m_pci_port 0xf2 1 u32;
        "m_vhca_mk" m_vhca_mk set_m_vhca_mk 0xf3 1 u32;
        "cmd_on_behalf" cmd_on_behalf set_cmd_on_behalf 0xf4 1 u32;
        "device_emulation_manager" device_emulation_manager set_device_emulation_manager 0xf5 1 u32;
        "terminate_scatter_list_mkey" terminate_scatter_list_mkey set_terminate_scatter_list_mkey 0xf6 1 u32;
        "repeated_mkey" repeated_mkey set_repeated_mkey 0xf7 1 u32;
        "dump_fill_mkey" dump_fill_mkey set_dump_fill_mkey 0xf8 1 u32;
        "fast_teardown" fast_teardown set_fast_teardown 0xfb 1 u32;
        "log_max_eq" log_max_eq set_log_max_eq 0xfc 4 u32;
        "max_indirection" max_indirection set_max_indirection 0x100 8 u32;
        "fixed_buffer_size" fixed_buffer_size set_fixed_buffer_size 0x108 1 u32;
        "log_max_mrw_sz" log_max_mrw_sz set_log_max_mrw_sz 0x109 7 u32;
        "force_teardown" force_teardown set_force_teardown 0x110 1 u32;
        "log_max_bsf_list_size" log_max_bsf_list_size set_log_max_bsf_list_size 0x112 6 u32;
        "umr_extended_translation_offset" umr_extended_translation_offset set_umr_extended_translation_offset 0x118 1 u32;
        "null_mkey" null_mkey set_null_mkey 0x119 1 u32;
        "log_max_klm_list_size" log_max_klm_list_size set_log_max_klm_list_size 0x11a 6 u32;
        "qpc_extension" qpc_extension set_qpc_extension 0x122 1 u32;
        "log_max_ra_req_dc" log_max_ra_req_dc set_log_max_ra_req_dc 0x12a 6 u32;
        "eth_wqe_too_small" eth_wqe_too_small set_eth_wqe_too_small 0x132 1 u32;
        "vnic_env_cq_overrun" vnic_env_cq_overrun set_vnic_env_cq_overrun 0x139 1 u32;
        "log_max_ra_res_dc" log_max_ra_res_dc set_log_max_ra_res_dc 0x13a 6 u32;
        "release_all_pages" release_all_pages set_release_all_pages 0x145 1 u32;
        "must_not_use" must_not_use set_must_not_use 0x146 1 u32;
        "sig_crc64_xp10" sig_crc64_xp10 set_sig_crc64_xp10 0x147 1 u32;
        "sig_crc32c" sig_crc32c set_sig_crc32c 0x148 1 u32;
        "roce_accl" roce_accl set_roce_accl 0x149 1 u32;
        "log_max_ra_req_qp" log_max_ra_req_qp set_log_max_ra_req_qp 0x14a 6 u32;
        "rts2rts_qp_udp_sport" rts2rts_qp_udp_sport set_rts2rts_qp_udp_sport 0x151 1 u32;
        "rts2rts_lag_tx_port_affinity" rts2rts_lag_tx_port_affinity set_rts2rts_lag_tx_port_affinity 0x152 1 u32;
        "dma_mmo_sq" dma_mmo_sq set_dma_mmo_sq 0x153 1 u32;
        "log_max_ra_res_qp" log_max_ra_res_qp set_log_max_ra_res_qp 0x15a 6 u32;
        "end_pad" end_pad set_end_pad 0x160 1 u32;
        "cc_query_allowed" cc_query_allowed set_cc_query_allowed 0x161 1 u32;
        "cc_modify_allowed" cc_modify_allowed set_cc_modify_allowed 0x162 1 u32;
        "start_pad" start_pad set_start_pad 0x163 1 u32;
        "cache_line_128byte" cache_line_128byte set_cache_line_128byte 0x164 1 u32;
        "gid_table_size_ro" gid_table_size_ro set_gid_table_size_ro 0x165 1 u32;
        "pkey_table_size_ro" pkey_table_size_ro set_pkey_table_size_ro 0x166 1 u32;
        "rnr_nak_q_counters" rnr_nak_q_counters set_rnr_nak_q_counters 0x168 1 u32;
        "rts2rts_qp_counters_set_id" rts2rts_qp_counters_set_id set_rts2rts_qp_counters_set_id 0x169 1 u32;
        "rts2rts_qp_dscp" rts2rts_qp_dscp set_rts2rts_qp_dscp 0x16a 1 u32;
        "vnic_env_int_rq_oob" vnic_env_int_rq_oob set_vnic_env_int_rq_oob 0x16c 1 u32;
        "sbcam_reg" sbcam_reg set_sbcam_reg 0x16d 1 u32;
        "qcam_reg" qcam_reg set_qcam_reg 0x16f 1 u32;
        "gid_table_size" gid_table_size set_gid_table_size 0x170 16 u32;
        "out_of_seq_cnt" out_of_seq_cnt set_out_of_seq_cnt 0x180 1 u32;
        "vport_counters" vport_counters set_vport_counters 0x181 1 u32;
        "retransmission_q_counters" retransmission_q_counters set_retransmission_q_counters 0x182 1 u32;
        "debug" debug set_debug 0x183 1 u32;
        "modify_rq_counter_set_id" modify_rq_counter_set_id set_modify_rq_counter_set_id 0x184 1 u32;
        "rq_delay_drop" rq_delay_drop set_rq_delay_drop 0x185 1 u32;
        "max_qp_cnt" max_qp_cnt set_max_qp_cnt 0x186 10 u32;
        "pkey_table_size" pkey_table_size set_pkey_table_size 0x190 16 u32;
        "vport_group_manager" vport_group_manager set_vport_group_manager 0x1a0 1 u32;
        "vhca_group_manager" vhca_group_manager set_vhca_group_manager 0x1a1 1 u32;
        "ib_virt" ib_virt set_ib_virt 0x1a2 1 u32;
        "eth_virt" eth_virt set_eth_virt 0x1a3 1 u32;
        "vnic_env_queue_counters" vnic_env_queue_counters set_vnic_env_queue_counters 0x1a4 1 u32;
        "ets" ets set_ets 0x1a5 1 u32;
        "nic_flow_table" nic_flow_table set_nic_flow_table 0x1a6 1 u32;
        "eswitch_manager" eswitch_manager set_eswitch_manager 0x1a7 1 u32;
        "device_memory" device_memory set_device_memory 0x1a8 1 u32;
        "mcam_reg" mcam_reg set_mcam_reg 0x1a9 1 u32;
        "pcam_reg" pcam_reg set_pcam_reg 0x1aa 1 u32;
        "local_ca_ack_delay" local_ca_ack_delay set_local_ca_ack_delay 0x1ab 5 u32;
        "port_module_event" port_module_event set_port_module_event 0x1b0 1 u32;
        "enhanced_error_q_counters" enhanced_error_q_counters set_enhanced_error_q_counters 0x1b1 1 u32;
        "ports_check" ports_check set_ports_check 0x1b2 1 u32;
        "pulse_gen_control" pulse_gen_control set_pulse_gen_control 0x1b3 1 u32;
        "disable_link_up" disable_link_up set_disable_link_up 0x1b4 1 u32;
        "beacon_led" beacon_led set_beacon_led 0x1b5 1 u32;
        "port_type" port_type set_port_type 0x1b6 2 u32;
        "num_ports" num_ports set_num_ports 0x1b8 8 u32;
        "pps" pps set_pps 0x1c1 1 u32;
        "pps_modify" pps_modify set_pps_modify 0x1c2 1 u32;
        "log_max_msg" log_max_msg set_log_max_msg 0x1c3 5 u32;
        "multi_path_xrc_rdma" multi_path_xrc_rdma set_multi_path_xrc_rdma 0x1c8 1 u32;
        "multi_path_dc_rdma" multi_path_dc_rdma set_multi_path_dc_rdma 0x1c9 1 u32;
        "multi_path_rc_rdma" multi_path_rc_rdma set_multi_path_rc_rdma 0x1ca 1 u32;
        "traffic_fast_control" traffic_fast_control set_traffic_fast_control 0x1cb 1 u32;
        "max_tc" max_tc set_max_tc 0x1cc 4 u32;
        "temp_warn_event" temp_warn_event set_temp_warn_event 0x1d0 1 u32;
        "dcbx" dcbx set_dcbx 0x1d1 1 u32;
        "general_notification_event" general_notification_event set_general_notification_event 0x1d2 1 u32;
        "multi_prio_sq" multi_prio_sq set_multi_prio_sq 0x1d3 1 u32;
        "afu_owner" afu_owner set_afu_owner 0x1d4 1 u32;
        "fpga" fpga set_fpga 0x1d5 1 u32;
        "rol_s" rol_s set_rol_s 0x1d6 1 u32;
        "rol_g" rol_g set_rol_g 0x1d7 1 u32;
        "ib_port_sniffer" ib_port_sniffer set_ib_port_sniffer 0x1d8 1 u32;
        "wol_s" wol_s set_wol_s 0x1d9 1 u32;
        "wol_g" wol_g set_wol_g 0x1da 1 u32;
        "wol_a" wol_a set_wol_a 0x1db 1 u32;
        "wol_b" wol_b set_wol_b 0x1dc 1 u32;
        "wol_m" wol_m set_wol_m 0x1dd 1 u32;
        "wol_u" wol_u set_wol_u 0x1de 1 u32;
        "wol_p" wol_p set_wol_p 0x1df 1 u32;
        "stat_rate_support" stat_rate_support set_stat_rate_support 0x1e0 16 u32;
        "sig_block_4048" sig_block_4048 set_sig_block_4048 0x1f0 1 u32;
        "pci_sync_for_fw_update_event" pci_sync_for_fw_update_event set_pci_sync_for_fw_update_event 0x1f1 1 u32;
        "init2_lag_tx_port_affinity" init2_lag_tx_port_affinity set_init2_lag_tx_port_affinity 0x1f8 1 u32;
        "cqe_version" cqe_version set_cqe_version 0x1fc 4 u32;
        "compact_address_vector" compact_address_vector set_compact_address_vector 0x200 1 u32;
        "striding_rq" striding_rq set_striding_rq 0x201 1 u32;
        "ipoib_enhanced_offloads" ipoib_enhanced_offloads set_ipoib_enhanced_offloads 0x203 1 u32;
        "ipoib_basic_offloads" ipoib_basic_offloads set_ipoib_basic_offloads 0x204 1 u32;
        "ib_striding_wq" ib_striding_wq set_ib_striding_wq 0x205 1 u32;
        "repeated_block_disabled" repeated_block_disabled set_repeated_block_disabled 0x206 1 u32;
        "umr_modify_entity_size_disabled" umr_modify_entity_size_disabled set_umr_modify_entity_size_disabled 0x207 1 u32;
        "umr_modify_atomic_disabled" umr_modify_atomic_disabled set_umr_modify_atomic_disabled 0x208 1 u32;
        "umr_indirect_mkey_disabled" umr_indirect_mkey_disabled set_umr_indirect_mkey_disabled 0x209 1 u32;
        "umr_fence" umr_fence set_umr_fence 0x20a 2 u32;
        "dc_req_scat_data_cqe" dc_req_scat_data_cqe set_dc_req_scat_data_cqe 0x20c 1 u32;
        "dc_connect_qp" dc_connect_qp set_dc_connect_qp 0x20d 1 u32;
        "dc_cnak_trace" dc_cnak_trace set_dc_cnak_trace 0x20e 1 u32;
        "drain_sigerr" drain_sigerr set_drain_sigerr 0x20f 1 u32;
        "cmdif_checksum" cmdif_checksum set_cmdif_checksum 0x210 2 u32;
        "sigerr_cqe" sigerr_cqe set_sigerr_cqe 0x212 1 u32;
        "wq_signature" wq_signature set_wq_signature 0x214 1 u32;
        "sctr_data_cqe" sctr_data_cqe set_sctr_data_cqe 0x215 1 u32;
        "sho" sho set_sho 0x217 1 u32;
        "tph" tph set_tph 0x218 1 u32;
        "rf" rf set_rf 0x219 1 u32;
        "dct" dct set_dct 0x21a 1 u32;
        "qos" qos set_qos 0x21b 1 u32;
        "eth_net_offloads" eth_net_offloads set_eth_net_offloads 0x21c 1 u32;
        "roce" roce set_roce 0x21d 1 u32;
        "atomic" atomic set_atomic 0x21e 1 u32;
        "extended_retry_count" extended_retry_count set_extended_retry_count 0x21f 1 u32;
        "cq_oi" cq_oi set_cq_oi 0x220 1 u32;
        "cq_resize" cq_resize set_cq_resize 0x221 1 u32;
        "cq_moderation" cq_moderation set_cq_moderation 0x222 1 u32;
        "cq_period_mode_modify" cq_period_mode_modify set_cq_period_mode_modify 0x223 1 u32;
        "cq_invalidate" cq_invalidate set_cq_invalidate 0x224 1 u32;
        "cq_eq_remap" cq_eq_remap set_cq_eq_remap 0x226 1 u32;
        "pg" pg set_pg 0x227 1 u32;
        "block_lb_mc" block_lb_mc set_block_lb_mc 0x228 1 u32;
        "exponential_backoff" exponential_backoff set_exponential_backoff 0x229 1 u32;
        "scqe_break_moderation" scqe_break_moderation set_scqe_break_moderation 0x22a 1 u32;
        "cq_period_start_from_cqe" cq_period_start_from_cqe set_cq_period_start_from_cqe 0x22b 1 u32;
        "cd" cd set_cd 0x22c 1 u32;
        "atm" atm set_atm 0x22d 1 u32;
        "apm" apm set_apm 0x22e 1 u32;
        "vector_calc" vector_calc set_vector_calc 0x22f 1 u32;
        "umr_ptr_rlky" umr_ptr_rlky set_umr_ptr_rlky 0x230 1 u32;
        "imaicl" imaicl set_imaicl 0x231 1 u32;
        "qp_packet_based" qp_packet_based set_qp_packet_based 0x232 1 u32;
        "ipoib_enhanced_pkey_change" ipoib_enhanced_pkey_change set_ipoib_enhanced_pkey_change 0x234 1 u32;
        "initiator_src_dct_in_cqe" initiator_src_dct_in_cqe set_initiator_src_dct_in_cqe 0x235 1 u32;
        "qkv" qkv set_qkv 0x236 1 u32;
        "pkv" pkv set_pkv 0x237 1 u32;
        "set_deth_sqpn" set_deth_sqpn set_set_deth_sqpn 0x238 1 u32;
        "rts2rts_primary_sl" rts2rts_primary_sl set_rts2rts_primary_sl 0x239 1 u32;
        "initiator_src_dct" initiator_src_dct set_initiator_src_dct 0x23a 1 u32;
        "dc_v2" dc_v2 set_dc_v2 0x23b 1 u32;
        "xrc" xrc set_xrc 0x23c 1 u32;
        "ud" ud set_ud 0x23d 1 u32;
        "uc" uc set_uc 0x23e 1 u32;
        "rc" rc set_rc 0x23f 1 u32;
        "uar_4k" uar_4k set_uar_4k 0x240 1 u32;
        "fl_rc_qp_when_roce_disabled" fl_rc_qp_when_roce_disabled set_fl_rc_qp_when_roce_disabled 0x248 1 u32;
        "regexp_params" regexp_params set_regexp_params 0x249 1 u32;
        "uar_sz" uar_sz set_uar_sz 0x24a 6 u32;
        "port_selection_cap" port_selection_cap set_port_selection_cap 0x250 1 u32;
        "umem_uid_0" umem_uid_0 set_umem_uid_0 0x252 1 u32;
        "log_max_dc_cnak_qps" log_max_dc_cnak_qps set_log_max_dc_cnak_qps 0x253 5 u32;
        "log_pg_sz" log_pg_sz set_log_pg_sz 0x258 8 u32;
        "bf" bf set_bf 0x260 1 u32;
        "driver_version" driver_version set_driver_version 0x261 1 u32;
        "pad_tx_eth_packet" pad_tx_eth_packet set_pad_tx_eth_packet 0x262 1 u32;
        "query_driver_version" query_driver_version set_query_driver_version 0x263 1 u32;
        "max_qp_retry_freq" max_qp_retry_freq set_max_qp_retry_freq 0x264 1 u32;
        "qp_by_name" qp_by_name set_qp_by_name 0x265 1 u32;
        "mkey_by_name" mkey_by_name set_mkey_by_name 0x266 1 u32;
        "suspend_qp_uc" suspend_qp_uc set_suspend_qp_uc 0x268 1 u32;
        "suspend_qp_ud" suspend_qp_ud set_suspend_qp_ud 0x269 1 u32;
        "suspend_qp_rc" suspend_qp_rc set_suspend_qp_rc 0x26a 1 u32;
        "log_bf_reg_size" log_bf_reg_size set_log_bf_reg_size 0x26b 5 u32;
        "lag_dct" lag_dct set_lag_dct 0x276 2 u32;
        "lag_tx_port_affinity" lag_tx_port_affinity set_lag_tx_port_affinity 0x278 1 u32;
        "lag_native_fdb_selection" lag_native_fdb_selection set_lag_native_fdb_selection 0x279 1 u32;
        "lag_master" lag_master set_lag_master 0x27b 1 u32;
        "num_lag_ports" num_lag_ports set_num_lag_ports 0x27c 4 u32;
        "num_of_diagnostic_counters" num_of_diagnostic_counters set_num_of_diagnostic_counters 0x280 16 u32;
        "max_wqe_sz_sq" max_wqe_sz_sq set_max_wqe_sz_sq 0x290 16 u32;
        "max_wqe_sz_rq" max_wqe_sz_rq set_max_wqe_sz_rq 0x2b0 16 u32;
        "max_flow_counter_31_16" max_flow_counter_31_16 set_max_flow_counter_31_16 0x2c0 16 u32;
        "max_wqe_sz_sq_dc" max_wqe_sz_sq_dc set_max_wqe_sz_sq_dc 0x2d0 16 u32;
        "max_qp_mcg" max_qp_mcg set_max_qp_mcg 0x2e7 25 u32;
        "mlnx_tag_ethertype" mlnx_tag_ethertype set_mlnx_tag_ethertype 0x300 16 u32;
        "flow_counter_bulk_alloc" flow_counter_bulk_alloc set_flow_counter_bulk_alloc 0x310 8 u32;
        "log_max_mcg" log_max_mcg set_log_max_mcg 0x318 8 u32;
        "log_max_transport_domain" log_max_transport_domain set_log_max_transport_domain 0x323 5 u32;
        "log_max_pd" log_max_pd set_log_max_pd 0x32b 5 u32;
        "dp_ordering_ooo_all_ud" dp_ordering_ooo_all_ud set_dp_ordering_ooo_all_ud 0x330 1 u32;
        "dp_ordering_ooo_all_uc" dp_ordering_ooo_all_uc set_dp_ordering_ooo_all_uc 0x331 1 u32;
        "dp_ordering_ooo_all_xrc" dp_ordering_ooo_all_xrc set_dp_ordering_ooo_all_xrc 0x332 1 u32;
        "dp_ordering_ooo_all_dc" dp_ordering_ooo_all_dc set_dp_ordering_ooo_all_dc 0x333 1 u32;
        "dp_ordering_ooo_all_rc" dp_ordering_ooo_all_rc set_dp_ordering_ooo_all_rc 0x334 1 u32;
        "log_max_xrcd" log_max_xrcd set_log_max_xrcd 0x33b 5 u32;
        "nic_receive_steering_discard" nic_receive_steering_discard set_nic_receive_steering_discard 0x340 1 u32;
        "receive_discard_vport_down" receive_discard_vport_down set_receive_discard_vport_down 0x341 1 u32;
        "transmit_discard_vport_down" transmit_discard_vport_down set_transmit_discard_vport_down 0x342 1 u32;
        "eq_overrun_count" eq_overrun_count set_eq_overrun_count 0x343 1 u32;
        "nic_receive_steering_depth" nic_receive_steering_depth set_nic_receive_steering_depth 0x344 1 u32;
        "invalid_command_count" invalid_command_count set_invalid_command_count 0x345 1 u32;
        "quota_exceeded_count" quota_exceeded_count set_quota_exceeded_count 0x346 1 u32;
        "log_max_flow_counter_bulk" log_max_flow_counter_bulk set_log_max_flow_counter_bulk 0x348 8 u32;
        "max_flow_counter_15_0" max_flow_counter_15_0 set_max_flow_counter_15_0 0x350 16 u32;
        "modify_tis" modify_tis set_modify_tis 0x360 1 u32;
        "log_max_rq" log_max_rq set_log_max_rq 0x363 5 u32;
        "log_max_sq" log_max_sq set_log_max_sq 0x36b 5 u32;
        "log_max_tir" log_max_tir set_log_max_tir 0x373 5 u32;
        "log_max_tis" log_max_tis set_log_max_tis 0x37b 5 u32;
        "basic_cyclic_rcv_wqe" basic_cyclic_rcv_wqe set_basic_cyclic_rcv_wqe 0x380 1 u32;
        "log_max_rmp" log_max_rmp set_log_max_rmp 0x383 5 u32;
        "log_max_rqt" log_max_rqt set_log_max_rqt 0x38b 5 u32;
        "log_max_rqt_size" log_max_rqt_size set_log_max_rqt_size 0x393 5 u32;
        "log_max_tis_per_sq" log_max_tis_per_sq set_log_max_tis_per_sq 0x39b 5 u32;
        "ext_stride_num_range" ext_stride_num_range set_ext_stride_num_range 0x3a0 1 u32;
        "roce_rw_supported" roce_rw_supported set_roce_rw_supported 0x3a1 1 u32;
        "log_max_current_uc_list_wr_supported" log_max_current_uc_list_wr_supported set_log_max_current_uc_list_wr_supported 0x3a2 1 u32;
        "log_max_stride_sz_rq" log_max_stride_sz_rq set_log_max_stride_sz_rq 0x3a3 5 u32;
        "log_min_stride_sz_rq" log_min_stride_sz_rq set_log_min_stride_sz_rq 0x3ab 5 u32;
        "log_max_stride_sz_sq" log_max_stride_sz_sq set_log_max_stride_sz_sq 0x3b3 5 u32;
        "log_min_stride_sz_sq" log_min_stride_sz_sq set_log_min_stride_sz_sq 0x3bb 5 u32;
        "hairpin" hairpin set_hairpin 0x3c0 1 u32;
        "log_max_hairpin_queues" log_max_hairpin_queues set_log_max_hairpin_queues 0x3c3 5 u32;
        "log_max_hairpin_wq_data_sz" log_max_hairpin_wq_data_sz set_log_max_hairpin_wq_data_sz 0x3cb 5 u32;
        "log_max_hairpin_num_packets" log_max_hairpin_num_packets set_log_max_hairpin_num_packets 0x3d3 5 u32;
        "log_max_wq_sz" log_max_wq_sz set_log_max_wq_sz 0x3db 5 u32;
        "nic_vport_change_event" nic_vport_change_event set_nic_vport_change_event 0x3e0 1 u32;
        "disable_local_lb_uc" disable_local_lb_uc set_disable_local_lb_uc 0x3e1 1 u32;
        "disable_local_lb_mc" disable_local_lb_mc set_disable_local_lb_mc 0x3e2 1 u32;
        "log_min_hairpin_wq_data_sz" log_min_hairpin_wq_data_sz set_log_min_hairpin_wq_data_sz 0x3e3 5 u32;
        "vhca_state" vhca_state set_vhca_state 0x3ea 1 u32;
        "log_max_vlan_list" log_max_vlan_list set_log_max_vlan_list 0x3eb 5 u32;
        "aes_xts_single_block_le_tweak" aes_xts_single_block_le_tweak set_aes_xts_single_block_le_tweak 0x3f1 1 u32;
        "aes_xts_multi_block_be_tweak" aes_xts_multi_block_be_tweak set_aes_xts_multi_block_be_tweak 0x3f2 1 u32;
        "log_max_current_mc_list" log_max_current_mc_list set_log_max_current_mc_list 0x3f3 5 u32;
        "log_max_current_uc_list" log_max_current_uc_list set_log_max_current_uc_list 0x3fb 5 u32;
        "general_obj_types" general_obj_types set_general_obj_types 0x400 64 u64;
        "sq_ts_format" sq_ts_format set_sq_ts_format 0x440 2 u32;
        "rq_ts_format" rq_ts_format set_rq_ts_format 0x442 2 u32;
        "steering_format_version" steering_format_version set_steering_format_version 0x444 4 u32;
        "create_qp_start_hint" create_qp_start_hint set_create_qp_start_hint 0x448 24 u32;
        "ats" ats set_ats 0x461 1 u32;
        "log_max_uctx" log_max_uctx set_log_max_uctx 0x463 5 u32;
        "crypto" crypto set_crypto 0x469 1 u32;
        "ipsec_offload" ipsec_offload set_ipsec_offload 0x46a 1 u32;
        "log_max_umem" log_max_umem set_log_max_umem 0x46b 5 u32;
        "max_num_eqs" max_num_eqs set_max_num_eqs 0x470 16 u32;
        "sigerr_domain_and_sig_type" sigerr_domain_and_sig_type set_sigerr_domain_and_sig_type 0x480 1 u32;
        "tls_tx" tls_tx set_tls_tx 0x481 1 u32;
        "tls_rx" tls_rx set_tls_rx 0x482 1 u32;
        "log_max_l2_table" log_max_l2_table set_log_max_l2_table 0x483 5 u32;
        "log_uar_page_sz" log_uar_page_sz set_log_uar_page_sz 0x490 16 u32;
        "device_frequency_mhz" device_frequency_mhz set_device_frequency_mhz 0x4c0 32 u32;
        "device_frequency_khz" device_frequency_khz set_device_frequency_khz 0x4e0 32 u32;
        "capi" capi set_capi 0x500 1 u32;
        "create_pec" create_pec set_create_pec 0x501 1 u32;
        "nvmf_target_offload" nvmf_target_offload set_nvmf_target_offload 0x502 1 u32;
        "capi_invalidate" capi_invalidate set_capi_invalidate 0x503 1 u32;
        "log_max_pasid" log_max_pasid set_log_max_pasid 0x51b 5 u32;
        "num_of_uars_per_page" num_of_uars_per_page set_num_of_uars_per_page 0x520 32 u32;
        "flex_parser_protocols" flex_parser_protocols set_flex_parser_protocols 0x540 32 u32;
        "max_geneve_tlv_options" max_geneve_tlv_options set_max_geneve_tlv_options 0x560 8 u32;
        "max_geneve_tlv_option_data_len" max_geneve_tlv_option_data_len set_max_geneve_tlv_option_data_len 0x56b 5 u32;
        "flex_parser_header_modify" flex_parser_header_modify set_flex_parser_header_modify 0x570 1 u32;
        "log_max_guaranteed_connections" log_max_guaranteed_connections set_log_max_guaranteed_connections 0x573 5 u32;
        "adv_virtualization" adv_virtualization set_adv_virtualization 0x579 1 u32;
        "log_max_dct_connections" log_max_dct_connections set_log_max_dct_connections 0x57b 5 u32;
        "log_max_atomic_size_qp" log_max_atomic_size_qp set_log_max_atomic_size_qp 0x580 8 u32;
        "log_max_dci_stream_channels" log_max_dci_stream_channels set_log_max_dci_stream_channels 0x58b 5 u32;
        "log_max_dci_errored_streams" log_max_dci_errored_streams set_log_max_dci_errored_streams 0x593 5 u32;
        "log_max_atomic_size_dc" log_max_atomic_size_dc set_log_max_atomic_size_dc 0x598 8 u32;
        "enhanced_cqe_compression" enhanced_cqe_compression set_enhanced_cqe_compression 0x5b0 1 u32;
        "log_max_dek" log_max_dek set_log_max_dek 0x5b3 5 u32;
        "mini_cqe_resp_stride_index" mini_cqe_resp_stride_index set_mini_cqe_resp_stride_index 0x5bc 1 u32;
        "cqe_128_always" cqe_128_always set_cqe_128_always 0x5bd 1 u32;
        "cqe_compression_128" cqe_compression_128 set_cqe_compression_128 0x5be 1 u32;
        "cqe_compression" cqe_compression set_cqe_compression 0x5bf 1 u32;
        "cqe_compression_timeout" cqe_compression_timeout set_cqe_compression_timeout 0x5c0 16 u32;
        "cqe_compression_max_num" cqe_compression_max_num set_cqe_compression_max_num 0x5d0 16 u32;
        "flex_parser_id_gtpu_dw_0" flex_parser_id_gtpu_dw_0 set_flex_parser_id_gtpu_dw_0 0x5e8 4 u32;
        "log_max_tm_offloaded_op_size" log_max_tm_offloaded_op_size set_log_max_tm_offloaded_op_size 0x5ec 4 u32;
        "tag_matching" tag_matching set_tag_matching 0x5f0 1 u32;
        "rndv_offload_rc" rndv_offload_rc set_rndv_offload_rc 0x5f1 1 u32;
        "rndv_offload_dc" rndv_offload_dc set_rndv_offload_dc 0x5f2 1 u32;
        "log_tag_matching_list_sz" log_tag_matching_list_sz set_log_tag_matching_list_sz 0x5f3 5 u32;
        "log_max_xrq" log_max_xrq set_log_max_xrq 0x5fb 5 u32;
        "affiliate_nic_vport_criteria" affiliate_nic_vport_criteria set_affiliate_nic_vport_criteria 0x600 8 u32;
        "native_port_num" native_port_num set_native_port_num 0x608 8 u32;
        "num_vhca_ports" num_vhca_ports set_num_vhca_ports 0x610 8 u32;
        "flex_parser_id_gtpu_teid" flex_parser_id_gtpu_teid set_flex_parser_id_gtpu_teid 0x618 4 u32;
        "trusted_vnic_vhca" trusted_vnic_vhca set_trusted_vnic_vhca 0x61d 1 u32;
        "sw_owner_id" sw_owner_id set_sw_owner_id 0x61e 1 u32;
        "reserve_not_to_use" reserve_not_to_use set_reserve_not_to_use 0x61f 1 u32;
        "max_num_of_monitor_counters" max_num_of_monitor_counters set_max_num_of_monitor_counters 0x620 16 u32;
        "num_ppcnt_monitor_counters" num_ppcnt_monitor_counters set_num_ppcnt_monitor_counters 0x630 16 u32;
        "max_num_sf" max_num_sf set_max_num_sf 0x640 16 u32;
        "num_q_monitor_counters" num_q_monitor_counters set_num_q_monitor_counters 0x650 16 u32;
        "sf" sf set_sf 0x680 1 u32;
        "sf_set_partition" sf_set_partition set_sf_set_partition 0x681 1 u32;
        "log_max_sf" log_max_sf set_log_max_sf 0x683 5 u32;
        "apu" apu set_apu 0x688 1 u32;
        "migration" migration set_migration 0x68d 1 u32;
        "log_min_sf_size" log_min_sf_size set_log_min_sf_size 0x690 8 u32;
        "max_num_sf_partitions" max_num_sf_partitions set_max_num_sf_partitions 0x698 8 u32;
        "uctx_cap" uctx_cap set_uctx_cap 0x6a0 32 u32;
        "flex_parser_id_geneve_tlv_option_0" flex_parser_id_geneve_tlv_option_0 set_flex_parser_id_geneve_tlv_option_0 0x6c4 4 u32;
        "flex_parser_id_icmp_dw1" flex_parser_id_icmp_dw1 set_flex_parser_id_icmp_dw1 0x6c8 4 u32;
        "flex_parser_id_icmp_dw0" flex_parser_id_icmp_dw0 set_flex_parser_id_icmp_dw0 0x6cc 4 u32;
        "flex_parser_id_icmpv6_dw1" flex_parser_id_icmpv6_dw1 set_flex_parser_id_icmpv6_dw1 0x6d0 4 u32;
        "flex_parser_id_icmpv6_dw0" flex_parser_id_icmpv6_dw0 set_flex_parser_id_icmpv6_dw0 0x6d4 4 u32;
        "flex_parser_id_outer_first_mpls_over_gre" flex_parser_id_outer_first_mpls_over_gre set_flex_parser_id_outer_first_mpls_over_gre 0x6d8 4 u32;
        "flex_parser_id_outer_first_mpls_over_udp_label" flex_parser_id_outer_first_mpls_over_udp_label set_flex_parser_id_outer_first_mpls_over_udp_label 0x6dc 4 u32;
        "max_num_match_definer" max_num_match_definer set_max_num_match_definer 0x6e0 16 u32;
        "sf_base_id" sf_base_id set_sf_base_id 0x6f0 16 u32;
        "flex_parser_id_gtpu_dw_2" flex_parser_id_gtpu_dw_2 set_flex_parser_id_gtpu_dw_2 0x700 4 u32;
        "flex_parser_id_gtpu_first_ext_dw_0" flex_parser_id_gtpu_first_ext_dw_0 set_flex_parser_id_gtpu_first_ext_dw_0 0x704 4 u32;
        "num_total_dynamic_vf_msix" num_total_dynamic_vf_msix set_num_total_dynamic_vf_msix 0x708 24 u32;
        "dynamic_msix_table_size" dynamic_msix_table_size set_dynamic_msix_table_size 0x734 12 u32;
        "dma_mmo_qp" dma_mmo_qp set_dma_mmo_qp 0x748 1 u32;
        "min_dynamic_vf_msix_table_size" min_dynamic_vf_msix_table_size set_min_dynamic_vf_msix_table_size 0x74c 4 u32;
        "max_dynamic_vf_msix_table_size" max_dynamic_vf_msix_table_size set_max_dynamic_vf_msix_table_size 0x754 12 u32;
        "log_max_num_header_modify_argument" log_max_num_header_modify_argument set_log_max_num_header_modify_argument 0x763 5 u32;
        "log_header_modify_argument_granularity" log_header_modify_argument_granularity set_log_header_modify_argument_granularity 0x76c 4 u32;
        "log_header_modify_argument_max_alloc" log_header_modify_argument_max_alloc set_log_header_modify_argument_max_alloc 0x773 5 u32;
        "vhca_tunnel_commands" vhca_tunnel_commands set_vhca_tunnel_commands 0x780 64 u64;
        "match_definer_format_supported" match_definer_format_supported set_match_definer_format_supported 0x7c0 64 u64;
    }
    subs {
    }
    rdma_core ["access_other_hca_roce", "qp_data_in_order", "log_dma_mmo_max_size", "tunneled_atomic", "as_notify", "m_pci_port", "m_vhca_mk", "cmd_on_behalf", "device_emulation_manager", "terminate_scatter_list_mkey", "repeated_mkey", "qpc_extension", "sig_crc64_xp10", "sig_crc32c", "rts2rts_qp_udp_sport", "rts2rts_lag_tx_port_affinity", "dma_mmo_sq", "gid_table_size_ro", "pkey_table_size_ro", "rnr_nak_q_counters", "rts2rts_qp_dscp", "pulse_gen_control", "multi_path_xrc_rdma", "multi_path_dc_rdma", "multi_path_rc_rdma", "traffic_fast_control", "multi_prio_sq", "afu_owner", "ib_port_sniffer", "sig_block_4048", "ib_striding_wq", "dc_connect_qp", "dc_cnak_trace", "extended_retry_count", "cq_period_mode_modify", "cq_invalidate", "exponential_backoff", "atm", "ipoib_enhanced_pkey_change", "initiator_src_dct_in_cqe", "rts2rts_primary_sl", "initiator_src_dct", "dc_v2", "log_max_dc_cnak_qps", "query_driver_version", "max_qp_retry_freq", "qp_by_name", "suspend_qp_uc", "suspend_qp_ud", "suspend_qp_rc", "num_of_diagnostic_counters", "mlnx_tag_ethertype", "dp_ordering_ooo_all_ud", "dp_ordering_ooo_all_uc", "dp_ordering_ooo_all_xrc", "dp_ordering_ooo_all_dc", "dp_ordering_ooo_all_rc", "nic_receive_steering_depth", "modify_tis", "aes_xts_single_block_le_tweak", "aes_xts_multi_block_be_tweak", "crypto", "sigerr_domain_and_sig_type", "capi", "create_pec", "nvmf_target_offload", "capi_invalidate", "log_max_pasid", "flex_parser_header_modify", "log_max_guaranteed_connections", "log_max_dct_connections", "log_max_atomic_size_qp", "log_max_atomic_size_dc", "log_max_tm_offloaded_op_size", "trusted_vnic_vhca", "reserve_not_to_use", "dma_mmo_qp", "log_max_num_header_modify_argument", "log_header_modify_argument_granularity", "log_header_modify_argument_max_alloc"]
}

layout! {
    /// General device capabilities, second group ([`CapType::GENERAL_2`](crate::mlx5dv::prm::CapType::GENERAL_2)).
    CmdHcaCap2 = "cmd_hca_cap_2", bits 0x800, kernel_bits 0x800;
    fields {
        "log_reserved_qpn_granularity" log_reserved_qpn_granularity set_log_reserved_qpn_granularity 0x93 5 u32;
        "max_reformat_insert_size" max_reformat_insert_size set_max_reformat_insert_size 0xa0 8 u32;
        "max_reformat_insert_offset" max_reformat_insert_offset set_max_reformat_insert_offset 0xa8 8 u32;
        "max_reformat_remove_size" max_reformat_remove_size set_max_reformat_remove_size 0xb0 8 u32;
        "max_reformat_remove_offset" max_reformat_remove_offset set_max_reformat_remove_offset 0xb8 8 u32;
        "log_min_mkey_entity_size" log_min_mkey_entity_size set_log_min_mkey_entity_size 0x1ab 5 u32;
        "sw_vhca_id_valid" sw_vhca_id_valid set_sw_vhca_id_valid 0x221 1 u32;
        "sw_vhca_id" sw_vhca_id set_sw_vhca_id 0x222 14 u32;
        "ts_cqe_metadata_size2wqe_counter" ts_cqe_metadata_size2wqe_counter set_ts_cqe_metadata_size2wqe_counter 0x24b 5 u32;
    }
    subs {
    }
    rdma_core ["log_reserved_qpn_granularity"]
}

layout! {
    /// Atomic capabilities ([`CapType::ATOMIC`](crate::mlx5dv::prm::CapType::ATOMIC)): operations,
    /// operand sizes on QPs and DCs (`atomic_size_qp`, `atomic_size_dc`), the
    /// requester's endianness mode.
    AtomicCaps = "atomic_caps", bits 0x800, kernel_bits 0x800;
    fields {
        "atomic_req_8B_endianness_mode" atomic_req_8B_endianness_mode set_atomic_req_8B_endianness_mode 0x40 2 u32;
        "supported_atomic_req_8B_endianness_mode_1" supported_atomic_req_8B_endianness_mode_1 set_supported_atomic_req_8B_endianness_mode_1 0x46 1 u32;
        "atomic_operations" atomic_operations set_atomic_operations 0x90 16 u32;
        "atomic_size_qp" atomic_size_qp set_atomic_size_qp 0xb0 16 u32;
        "atomic_size_dc" atomic_size_dc set_atomic_size_dc 0xd0 16 u32;
        "fetch_add_pci_atomic" fetch_add_pci_atomic set_fetch_add_pci_atomic 0x280 16 u32;
        "swap_pci_atomic" swap_pci_atomic set_swap_pci_atomic 0x290 16 u32;
        "compare_swap_pci_atomic" compare_swap_pci_atomic set_compare_swap_pci_atomic 0x2a0 16 u32;
    }
    subs {
    }
    rdma_core ["fetch_add_pci_atomic", "swap_pci_atomic", "compare_swap_pci_atomic"]
}

layout! {
    /// Ethernet offload capabilities ([`CapType::ETHERNET_OFFLOADS`](crate::mlx5dv::prm::CapType::ETHERNET_OFFLOADS)):
    /// checksum, VLAN insertion, LRO, stateless tunnel offloads, ...
    PerProtocolNetworkingOffloadCaps = "per_protocol_networking_offload_caps", bits 0x800, kernel_bits 0x800;
    fields {
        "csum_cap" csum_cap set_csum_cap 0x0 1 u32;
        "vlan_cap" vlan_cap set_vlan_cap 0x1 1 u32;
        "lro_cap" lro_cap set_lro_cap 0x2 1 u32;
        "lro_psh_flag" lro_psh_flag set_lro_psh_flag 0x3 1 u32;
        "lro_time_stamp" lro_time_stamp set_lro_time_stamp 0x4 1 u32;
        "wqe_vlan_insert" wqe_vlan_insert set_wqe_vlan_insert 0x7 1 u32;
        "self_lb_en_modifiable" self_lb_en_modifiable set_self_lb_en_modifiable 0x8 1 u32;
        "max_lso_cap" max_lso_cap set_max_lso_cap 0xb 5 u32;
        "multi_pkt_send_wqe" multi_pkt_send_wqe set_multi_pkt_send_wqe 0x10 2 u32;
        "wqe_inline_mode" wqe_inline_mode set_wqe_inline_mode 0x12 2 u32;
        "rss_ind_tbl_cap" rss_ind_tbl_cap set_rss_ind_tbl_cap 0x14 4 u32;
        "reg_umr_sq" reg_umr_sq set_reg_umr_sq 0x18 1 u32;
        "scatter_fcs" scatter_fcs set_scatter_fcs 0x19 1 u32;
        "enhanced_multi_pkt_send_wqe" enhanced_multi_pkt_send_wqe set_enhanced_multi_pkt_send_wqe 0x1a 1 u32;
        "tunnel_lso_const_out_ip_id" tunnel_lso_const_out_ip_id set_tunnel_lso_const_out_ip_id 0x1b 1 u32;
        "tunnel_lro_gre" tunnel_lro_gre set_tunnel_lro_gre 0x1c 1 u32;
        "tunnel_lro_vxlan" tunnel_lro_vxlan set_tunnel_lro_vxlan 0x1d 1 u32;
        "tunnel_stateless_gre" tunnel_stateless_gre set_tunnel_stateless_gre 0x1e 1 u32;
        "tunnel_stateless_vxlan" tunnel_stateless_vxlan set_tunnel_stateless_vxlan 0x1f 1 u32;
        "swp" swp set_swp 0x20 1 u32;
        "swp_csum" swp_csum set_swp_csum 0x21 1 u32;
        "swp_lso" swp_lso set_swp_lso 0x22 1 u32;
        "cqe_checksum_full" cqe_checksum_full set_cqe_checksum_full 0x23 1 u32;
        "tunnel_stateless_geneve_tx" tunnel_stateless_geneve_tx set_tunnel_stateless_geneve_tx 0x24 1 u32;
        "tunnel_stateless_mpls_over_udp" tunnel_stateless_mpls_over_udp set_tunnel_stateless_mpls_over_udp 0x25 1 u32;
        "tunnel_stateless_mpls_over_gre" tunnel_stateless_mpls_over_gre set_tunnel_stateless_mpls_over_gre 0x26 1 u32;
        "tunnel_stateless_vxlan_gpe" tunnel_stateless_vxlan_gpe set_tunnel_stateless_vxlan_gpe 0x27 1 u32;
        "tunnel_stateless_ipv4_over_vxlan" tunnel_stateless_ipv4_over_vxlan set_tunnel_stateless_ipv4_over_vxlan 0x28 1 u32;
        "tunnel_stateless_ip_over_ip" tunnel_stateless_ip_over_ip set_tunnel_stateless_ip_over_ip 0x29 1 u32;
        "insert_trailer" insert_trailer set_insert_trailer 0x2a 1 u32;
        "tunnel_stateless_ip_over_ip_rx" tunnel_stateless_ip_over_ip_rx set_tunnel_stateless_ip_over_ip_rx 0x2c 1 u32;
        "tunnel_stateless_ip_over_ip_tx" tunnel_stateless_ip_over_ip_tx set_tunnel_stateless_ip_over_ip_tx 0x2d 1 u32;
        "max_vxlan_udp_ports" max_vxlan_udp_ports set_max_vxlan_udp_ports 0x30 8 u32;
        "max_geneve_opt_len" max_geneve_opt_len set_max_geneve_opt_len 0x3e 1 u32;
        "tunnel_stateless_geneve_rx" tunnel_stateless_geneve_rx set_tunnel_stateless_geneve_rx 0x3f 1 u32;
        "lro_min_mss_size" lro_min_mss_size set_lro_min_mss_size 0x50 16 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// On-demand paging operations allowed on one transport (a member of `odp_cap`).
    OdpPerTransportServiceCap = "odp_per_transport_service_cap", bits 0x20, kernel_bits 0x20;
    fields {
        "send" send set_send 0x0 1 u32;
        "receive" receive set_receive 0x1 1 u32;
        "write" write set_write 0x2 1 u32;
        "read" read set_read 0x3 1 u32;
        "atomic" atomic set_atomic 0x4 1 u32;
        "srq_receive" srq_receive set_srq_receive 0x5 1 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// On-demand paging capabilities ([`CapType::ODP`](crate::mlx5dv::prm::CapType::ODP)), one
    /// `odp_per_transport_service_cap` per transport.
    OdpCap = "odp_cap", bits 0x800, kernel_bits 0x800;
    fields {
        "sig" sig set_sig 0x40 1 u32;
    }
    subs {
        "rc_odp_caps" rc_odp_caps rc_odp_caps_mut OdpPerTransportServiceCap 0x80;
        "uc_odp_caps" uc_odp_caps uc_odp_caps_mut OdpPerTransportServiceCap 0xa0;
        "ud_odp_caps" ud_odp_caps ud_odp_caps_mut OdpPerTransportServiceCap 0xc0;
        "xrc_odp_caps" xrc_odp_caps xrc_odp_caps_mut OdpPerTransportServiceCap 0xe0;
        "dc_odp_caps" dc_odp_caps dc_odp_caps_mut OdpPerTransportServiceCap 0x100;
    }
    rdma_core []
}

layout! {
    /// RoCE capabilities ([`CapType::ROCE`](crate::mlx5dv::prm::CapType::ROCE)): versions, UDP
    /// source port range, QP timestamps.
    RoceCap = "roce_cap", bits 0x800, kernel_bits 0x800;
    fields {
        "roce_apm" roce_apm set_roce_apm 0x0 1 u32;
        "sw_r_roce_src_udp_port" sw_r_roce_src_udp_port set_sw_r_roce_src_udp_port 0x4 1 u32;
        "fl_rc_qp_when_roce_disabled" fl_rc_qp_when_roce_disabled set_fl_rc_qp_when_roce_disabled 0x5 1 u32;
        "fl_rc_qp_when_roce_enabled" fl_rc_qp_when_roce_enabled set_fl_rc_qp_when_roce_enabled 0x6 1 u32;
        "qp_ts_format" qp_ts_format set_qp_ts_format 0x1e 2 u32;
        "l3_type" l3_type set_l3_type 0x8c 4 u32;
        "roce_version" roce_version set_roce_version 0x98 8 u32;
        "r_roce_dest_udp_port" r_roce_dest_udp_port set_r_roce_dest_udp_port 0xb0 16 u32;
        "r_roce_max_src_udp_port" r_roce_max_src_udp_port set_r_roce_max_src_udp_port 0xc0 16 u32;
        "r_roce_min_src_udp_port" r_roce_min_src_udp_port set_r_roce_min_src_udp_port 0xd0 16 u32;
        "roce_address_table_size" roce_address_table_size set_roce_address_table_size 0xf0 16 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// QoS capabilities ([`CapType::QOS`](crate::mlx5dv::prm::CapType::QOS)): packet pacing rates,
    /// scheduling elements.
    QosCap = "qos_cap", bits 0x800, kernel_bits 0x800;
    fields {
        "packet_pacing" packet_pacing set_packet_pacing 0x0 1 u32;
        "esw_scheduling" esw_scheduling set_esw_scheduling 0x1 1 u32;
        "esw_bw_share" esw_bw_share set_esw_bw_share 0x2 1 u32;
        "esw_rate_limit" esw_rate_limit set_esw_rate_limit 0x3 1 u32;
        "packet_pacing_burst_bound" packet_pacing_burst_bound set_packet_pacing_burst_bound 0x5 1 u32;
        "packet_pacing_typical_size" packet_pacing_typical_size set_packet_pacing_typical_size 0x6 1 u32;
        "nic_sq_scheduling" nic_sq_scheduling set_nic_sq_scheduling 0x8 1 u32;
        "nic_bw_share" nic_bw_share set_nic_bw_share 0x9 1 u32;
        "nic_rate_limit" nic_rate_limit set_nic_rate_limit 0xa 1 u32;
        "packet_pacing_uid" packet_pacing_uid set_packet_pacing_uid 0xb 1 u32;
        "log_esw_max_sched_depth" log_esw_max_sched_depth set_log_esw_max_sched_depth 0xc 4 u32;
        "nic_qp_scheduling" nic_qp_scheduling set_nic_qp_scheduling 0x21 1 u32;
        "log_max_qos_nic_queue_group" log_max_qos_nic_queue_group set_log_max_qos_nic_queue_group 0x2b 5 u32;
        "packet_pacing_max_rate" packet_pacing_max_rate set_packet_pacing_max_rate 0x40 32 u32;
        "packet_pacing_min_rate" packet_pacing_min_rate set_packet_pacing_min_rate 0x60 32 u32;
        "packet_pacing_rate_table_size" packet_pacing_rate_table_size set_packet_pacing_rate_table_size 0x90 16 u32;
        "esw_element_type" esw_element_type set_esw_element_type 0xa0 16 u32;
        "esw_tsar_type" esw_tsar_type set_esw_tsar_type 0xb0 16 u32;
        "max_qos_para_vport" max_qos_para_vport set_max_qos_para_vport 0xd0 16 u32;
        "max_tsar_bw_share" max_tsar_bw_share set_max_tsar_bw_share 0xe0 32 u32;
        "nic_element_type" nic_element_type set_nic_element_type 0x100 16 u32;
        "nic_tsar_type" nic_tsar_type set_nic_tsar_type 0x110 16 u32;
        "log_meter_aso_granularity" log_meter_aso_granularity set_log_meter_aso_granularity 0x123 5 u32;
        "log_meter_aso_max_alloc" log_meter_aso_max_alloc set_log_meter_aso_max_alloc 0x12b 5 u32;
        "log_max_num_meter_aso" log_max_num_meter_aso set_log_max_num_meter_aso 0x133 5 u32;
    }
    subs {
    }
    rdma_core ["nic_qp_scheduling"]
}
