//! Command opcodes, capability groups, event types and QP optional-parameter
//! mask bits as typed constants, with their names in `mlx5_ifc.h` /
//! `device.h` (each type's `ALL` lists them for the oracle).

/// A command opcode (`MLX5_CMD_OP_*`, the `opcode` field of every command input).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u16);

impl Opcode {
    /// `MLX5_CMD_OP_QUERY_HCA_CAP` = 0x100.
    pub const QUERY_HCA_CAP: Opcode = Opcode(0x100);
    /// `MLX5_CMD_OP_QUERY_ADAPTER` = 0x101.
    pub const QUERY_ADAPTER: Opcode = Opcode(0x101);
    /// `MLX5_CMD_OP_INIT_HCA` = 0x102.
    pub const INIT_HCA: Opcode = Opcode(0x102);
    /// `MLX5_CMD_OP_TEARDOWN_HCA` = 0x103.
    pub const TEARDOWN_HCA: Opcode = Opcode(0x103);
    /// `MLX5_CMD_OP_ENABLE_HCA` = 0x104.
    pub const ENABLE_HCA: Opcode = Opcode(0x104);
    /// `MLX5_CMD_OP_DISABLE_HCA` = 0x105.
    pub const DISABLE_HCA: Opcode = Opcode(0x105);
    /// `MLX5_CMD_OP_QUERY_PAGES` = 0x107.
    pub const QUERY_PAGES: Opcode = Opcode(0x107);
    /// `MLX5_CMD_OP_MANAGE_PAGES` = 0x108.
    pub const MANAGE_PAGES: Opcode = Opcode(0x108);
    /// `MLX5_CMD_OP_SET_HCA_CAP` = 0x109.
    pub const SET_HCA_CAP: Opcode = Opcode(0x109);
    /// `MLX5_CMD_OP_QUERY_ISSI` = 0x10a.
    pub const QUERY_ISSI: Opcode = Opcode(0x10a);
    /// `MLX5_CMD_OP_SET_ISSI` = 0x10b.
    pub const SET_ISSI: Opcode = Opcode(0x10b);
    /// `MLX5_CMD_OP_SET_DRIVER_VERSION` = 0x10d.
    pub const SET_DRIVER_VERSION: Opcode = Opcode(0x10d);
    /// `MLX5_CMD_OP_QUERY_SF_PARTITION` = 0x111.
    pub const QUERY_SF_PARTITION: Opcode = Opcode(0x111);
    /// `MLX5_CMD_OP_ALLOC_SF` = 0x113.
    pub const ALLOC_SF: Opcode = Opcode(0x113);
    /// `MLX5_CMD_OP_DEALLOC_SF` = 0x114.
    pub const DEALLOC_SF: Opcode = Opcode(0x114);
    /// `MLX5_CMD_OP_SUSPEND_VHCA` = 0x115.
    pub const SUSPEND_VHCA: Opcode = Opcode(0x115);
    /// `MLX5_CMD_OP_RESUME_VHCA` = 0x116.
    pub const RESUME_VHCA: Opcode = Opcode(0x116);
    /// `MLX5_CMD_OP_QUERY_VHCA_MIGRATION_STATE` = 0x117.
    pub const QUERY_VHCA_MIGRATION_STATE: Opcode = Opcode(0x117);
    /// `MLX5_CMD_OP_SAVE_VHCA_STATE` = 0x118.
    pub const SAVE_VHCA_STATE: Opcode = Opcode(0x118);
    /// `MLX5_CMD_OP_LOAD_VHCA_STATE` = 0x119.
    pub const LOAD_VHCA_STATE: Opcode = Opcode(0x119);
    /// `MLX5_CMD_OP_CREATE_MKEY` = 0x200.
    pub const CREATE_MKEY: Opcode = Opcode(0x200);
    /// `MLX5_CMD_OP_QUERY_MKEY` = 0x201.
    pub const QUERY_MKEY: Opcode = Opcode(0x201);
    /// `MLX5_CMD_OP_DESTROY_MKEY` = 0x202.
    pub const DESTROY_MKEY: Opcode = Opcode(0x202);
    /// `MLX5_CMD_OP_QUERY_SPECIAL_CONTEXTS` = 0x203.
    pub const QUERY_SPECIAL_CONTEXTS: Opcode = Opcode(0x203);
    /// `MLX5_CMD_OP_PAGE_FAULT_RESUME` = 0x204.
    pub const PAGE_FAULT_RESUME: Opcode = Opcode(0x204);
    /// `MLX5_CMD_OP_ALLOC_MEMIC` = 0x205.
    pub const ALLOC_MEMIC: Opcode = Opcode(0x205);
    /// `MLX5_CMD_OP_DEALLOC_MEMIC` = 0x206.
    pub const DEALLOC_MEMIC: Opcode = Opcode(0x206);
    /// `MLX5_CMD_OP_MODIFY_MEMIC` = 0x207.
    pub const MODIFY_MEMIC: Opcode = Opcode(0x207);
    /// `MLX5_CMD_OP_CREATE_EQ` = 0x301.
    pub const CREATE_EQ: Opcode = Opcode(0x301);
    /// `MLX5_CMD_OP_DESTROY_EQ` = 0x302.
    pub const DESTROY_EQ: Opcode = Opcode(0x302);
    /// `MLX5_CMD_OP_QUERY_EQ` = 0x303.
    pub const QUERY_EQ: Opcode = Opcode(0x303);
    /// `MLX5_CMD_OP_GEN_EQE` = 0x304.
    pub const GEN_EQE: Opcode = Opcode(0x304);
    /// `MLX5_CMD_OP_CREATE_CQ` = 0x400.
    pub const CREATE_CQ: Opcode = Opcode(0x400);
    /// `MLX5_CMD_OP_DESTROY_CQ` = 0x401.
    pub const DESTROY_CQ: Opcode = Opcode(0x401);
    /// `MLX5_CMD_OP_QUERY_CQ` = 0x402.
    pub const QUERY_CQ: Opcode = Opcode(0x402);
    /// `MLX5_CMD_OP_MODIFY_CQ` = 0x403.
    pub const MODIFY_CQ: Opcode = Opcode(0x403);
    /// `MLX5_CMD_OP_CREATE_QP` = 0x500.
    pub const CREATE_QP: Opcode = Opcode(0x500);
    /// `MLX5_CMD_OP_DESTROY_QP` = 0x501.
    pub const DESTROY_QP: Opcode = Opcode(0x501);
    /// `MLX5_CMD_OP_RST2INIT_QP` = 0x502.
    pub const RST2INIT_QP: Opcode = Opcode(0x502);
    /// `MLX5_CMD_OP_INIT2RTR_QP` = 0x503.
    pub const INIT2RTR_QP: Opcode = Opcode(0x503);
    /// `MLX5_CMD_OP_RTR2RTS_QP` = 0x504.
    pub const RTR2RTS_QP: Opcode = Opcode(0x504);
    /// `MLX5_CMD_OP_RTS2RTS_QP` = 0x505.
    pub const RTS2RTS_QP: Opcode = Opcode(0x505);
    /// `MLX5_CMD_OP_SQERR2RTS_QP` = 0x506.
    pub const SQERR2RTS_QP: Opcode = Opcode(0x506);
    /// `MLX5_CMD_OP_2ERR_QP` = 0x507.
    pub const _2ERR_QP: Opcode = Opcode(0x507);
    /// `MLX5_CMD_OP_2RST_QP` = 0x50a.
    pub const _2RST_QP: Opcode = Opcode(0x50a);
    /// `MLX5_CMD_OP_QUERY_QP` = 0x50b.
    pub const QUERY_QP: Opcode = Opcode(0x50b);
    /// `MLX5_CMD_OP_SQD_RTS_QP` = 0x50c.
    pub const SQD_RTS_QP: Opcode = Opcode(0x50c);
    /// `MLX5_CMD_OP_INIT2INIT_QP` = 0x50e.
    pub const INIT2INIT_QP: Opcode = Opcode(0x50e);
    /// `MLX5_CMD_OP_CREATE_PSV` = 0x600.
    pub const CREATE_PSV: Opcode = Opcode(0x600);
    /// `MLX5_CMD_OP_DESTROY_PSV` = 0x601.
    pub const DESTROY_PSV: Opcode = Opcode(0x601);
    /// `MLX5_CMD_OP_CREATE_SRQ` = 0x700.
    pub const CREATE_SRQ: Opcode = Opcode(0x700);
    /// `MLX5_CMD_OP_DESTROY_SRQ` = 0x701.
    pub const DESTROY_SRQ: Opcode = Opcode(0x701);
    /// `MLX5_CMD_OP_QUERY_SRQ` = 0x702.
    pub const QUERY_SRQ: Opcode = Opcode(0x702);
    /// `MLX5_CMD_OP_ARM_RQ` = 0x703.
    pub const ARM_RQ: Opcode = Opcode(0x703);
    /// `MLX5_CMD_OP_CREATE_XRC_SRQ` = 0x705.
    pub const CREATE_XRC_SRQ: Opcode = Opcode(0x705);
    /// `MLX5_CMD_OP_DESTROY_XRC_SRQ` = 0x706.
    pub const DESTROY_XRC_SRQ: Opcode = Opcode(0x706);
    /// `MLX5_CMD_OP_QUERY_XRC_SRQ` = 0x707.
    pub const QUERY_XRC_SRQ: Opcode = Opcode(0x707);
    /// `MLX5_CMD_OP_ARM_XRC_SRQ` = 0x708.
    pub const ARM_XRC_SRQ: Opcode = Opcode(0x708);
    /// `MLX5_CMD_OP_CREATE_DCT` = 0x710.
    pub const CREATE_DCT: Opcode = Opcode(0x710);
    /// `MLX5_CMD_OP_DESTROY_DCT` = 0x711.
    pub const DESTROY_DCT: Opcode = Opcode(0x711);
    /// `MLX5_CMD_OP_DRAIN_DCT` = 0x712.
    pub const DRAIN_DCT: Opcode = Opcode(0x712);
    /// `MLX5_CMD_OP_QUERY_DCT` = 0x713.
    pub const QUERY_DCT: Opcode = Opcode(0x713);
    /// `MLX5_CMD_OP_ARM_DCT_FOR_KEY_VIOLATION` = 0x714.
    pub const ARM_DCT_FOR_KEY_VIOLATION: Opcode = Opcode(0x714);
    /// `MLX5_CMD_OP_CREATE_XRQ` = 0x717.
    pub const CREATE_XRQ: Opcode = Opcode(0x717);
    /// `MLX5_CMD_OP_DESTROY_XRQ` = 0x718.
    pub const DESTROY_XRQ: Opcode = Opcode(0x718);
    /// `MLX5_CMD_OP_QUERY_XRQ` = 0x719.
    pub const QUERY_XRQ: Opcode = Opcode(0x719);
    /// `MLX5_CMD_OP_ARM_XRQ` = 0x71a.
    pub const ARM_XRQ: Opcode = Opcode(0x71a);
    /// `MLX5_CMD_OP_QUERY_XRQ_DC_PARAMS_ENTRY` = 0x725.
    pub const QUERY_XRQ_DC_PARAMS_ENTRY: Opcode = Opcode(0x725);
    /// `MLX5_CMD_OP_SET_XRQ_DC_PARAMS_ENTRY` = 0x726.
    pub const SET_XRQ_DC_PARAMS_ENTRY: Opcode = Opcode(0x726);
    /// `MLX5_CMD_OP_QUERY_XRQ_ERROR_PARAMS` = 0x727.
    pub const QUERY_XRQ_ERROR_PARAMS: Opcode = Opcode(0x727);
    /// `MLX5_CMD_OP_RELEASE_XRQ_ERROR` = 0x729.
    pub const RELEASE_XRQ_ERROR: Opcode = Opcode(0x729);
    /// `MLX5_CMD_OP_MODIFY_XRQ` = 0x72a.
    pub const MODIFY_XRQ: Opcode = Opcode(0x72a);
    /// `MLX5_CMD_OP_QUERY_ESW_FUNCTIONS` = 0x740.
    pub const QUERY_ESW_FUNCTIONS: Opcode = Opcode(0x740);
    /// `MLX5_CMD_OP_QUERY_VPORT_STATE` = 0x750.
    pub const QUERY_VPORT_STATE: Opcode = Opcode(0x750);
    /// `MLX5_CMD_OP_MODIFY_VPORT_STATE` = 0x751.
    pub const MODIFY_VPORT_STATE: Opcode = Opcode(0x751);
    /// `MLX5_CMD_OP_QUERY_ESW_VPORT_CONTEXT` = 0x752.
    pub const QUERY_ESW_VPORT_CONTEXT: Opcode = Opcode(0x752);
    /// `MLX5_CMD_OP_MODIFY_ESW_VPORT_CONTEXT` = 0x753.
    pub const MODIFY_ESW_VPORT_CONTEXT: Opcode = Opcode(0x753);
    /// `MLX5_CMD_OP_QUERY_NIC_VPORT_CONTEXT` = 0x754.
    pub const QUERY_NIC_VPORT_CONTEXT: Opcode = Opcode(0x754);
    /// `MLX5_CMD_OP_MODIFY_NIC_VPORT_CONTEXT` = 0x755.
    pub const MODIFY_NIC_VPORT_CONTEXT: Opcode = Opcode(0x755);
    /// `MLX5_CMD_OP_QUERY_ROCE_ADDRESS` = 0x760.
    pub const QUERY_ROCE_ADDRESS: Opcode = Opcode(0x760);
    /// `MLX5_CMD_OP_SET_ROCE_ADDRESS` = 0x761.
    pub const SET_ROCE_ADDRESS: Opcode = Opcode(0x761);
    /// `MLX5_CMD_OP_QUERY_HCA_VPORT_CONTEXT` = 0x762.
    pub const QUERY_HCA_VPORT_CONTEXT: Opcode = Opcode(0x762);
    /// `MLX5_CMD_OP_MODIFY_HCA_VPORT_CONTEXT` = 0x763.
    pub const MODIFY_HCA_VPORT_CONTEXT: Opcode = Opcode(0x763);
    /// `MLX5_CMD_OP_QUERY_HCA_VPORT_GID` = 0x764.
    pub const QUERY_HCA_VPORT_GID: Opcode = Opcode(0x764);
    /// `MLX5_CMD_OP_QUERY_HCA_VPORT_PKEY` = 0x765.
    pub const QUERY_HCA_VPORT_PKEY: Opcode = Opcode(0x765);
    /// `MLX5_CMD_OP_QUERY_VNIC_ENV` = 0x76f.
    pub const QUERY_VNIC_ENV: Opcode = Opcode(0x76f);
    /// `MLX5_CMD_OP_QUERY_VPORT_COUNTER` = 0x770.
    pub const QUERY_VPORT_COUNTER: Opcode = Opcode(0x770);
    /// `MLX5_CMD_OP_ALLOC_Q_COUNTER` = 0x771.
    pub const ALLOC_Q_COUNTER: Opcode = Opcode(0x771);
    /// `MLX5_CMD_OP_DEALLOC_Q_COUNTER` = 0x772.
    pub const DEALLOC_Q_COUNTER: Opcode = Opcode(0x772);
    /// `MLX5_CMD_OP_QUERY_Q_COUNTER` = 0x773.
    pub const QUERY_Q_COUNTER: Opcode = Opcode(0x773);
    /// `MLX5_CMD_OP_SET_MONITOR_COUNTER` = 0x774.
    pub const SET_MONITOR_COUNTER: Opcode = Opcode(0x774);
    /// `MLX5_CMD_OP_ARM_MONITOR_COUNTER` = 0x775.
    pub const ARM_MONITOR_COUNTER: Opcode = Opcode(0x775);
    /// `MLX5_CMD_OP_SET_PP_RATE_LIMIT` = 0x780.
    pub const SET_PP_RATE_LIMIT: Opcode = Opcode(0x780);
    /// `MLX5_CMD_OP_QUERY_RATE_LIMIT` = 0x781.
    pub const QUERY_RATE_LIMIT: Opcode = Opcode(0x781);
    /// `MLX5_CMD_OP_CREATE_SCHEDULING_ELEMENT` = 0x782.
    pub const CREATE_SCHEDULING_ELEMENT: Opcode = Opcode(0x782);
    /// `MLX5_CMD_OP_DESTROY_SCHEDULING_ELEMENT` = 0x783.
    pub const DESTROY_SCHEDULING_ELEMENT: Opcode = Opcode(0x783);
    /// `MLX5_CMD_OP_QUERY_SCHEDULING_ELEMENT` = 0x784.
    pub const QUERY_SCHEDULING_ELEMENT: Opcode = Opcode(0x784);
    /// `MLX5_CMD_OP_MODIFY_SCHEDULING_ELEMENT` = 0x785.
    pub const MODIFY_SCHEDULING_ELEMENT: Opcode = Opcode(0x785);
    /// `MLX5_CMD_OP_CREATE_QOS_PARA_VPORT` = 0x786.
    pub const CREATE_QOS_PARA_VPORT: Opcode = Opcode(0x786);
    /// `MLX5_CMD_OP_DESTROY_QOS_PARA_VPORT` = 0x787.
    pub const DESTROY_QOS_PARA_VPORT: Opcode = Opcode(0x787);
    /// `MLX5_CMD_OP_ALLOC_PD` = 0x800.
    pub const ALLOC_PD: Opcode = Opcode(0x800);
    /// `MLX5_CMD_OP_DEALLOC_PD` = 0x801.
    pub const DEALLOC_PD: Opcode = Opcode(0x801);
    /// `MLX5_CMD_OP_ALLOC_UAR` = 0x802.
    pub const ALLOC_UAR: Opcode = Opcode(0x802);
    /// `MLX5_CMD_OP_DEALLOC_UAR` = 0x803.
    pub const DEALLOC_UAR: Opcode = Opcode(0x803);
    /// `MLX5_CMD_OP_CONFIG_INT_MODERATION` = 0x804.
    pub const CONFIG_INT_MODERATION: Opcode = Opcode(0x804);
    /// `MLX5_CMD_OP_ACCESS_REG` = 0x805.
    pub const ACCESS_REG: Opcode = Opcode(0x805);
    /// `MLX5_CMD_OP_ATTACH_TO_MCG` = 0x806.
    pub const ATTACH_TO_MCG: Opcode = Opcode(0x806);
    /// `MLX5_CMD_OP_DETACH_FROM_MCG` = 0x807.
    pub const DETACH_FROM_MCG: Opcode = Opcode(0x807);
    /// `MLX5_CMD_OP_GET_DROPPED_PACKET_LOG` = 0x80a.
    pub const GET_DROPPED_PACKET_LOG: Opcode = Opcode(0x80a);
    /// `MLX5_CMD_OP_MAD_IFC` = 0x50d.
    pub const MAD_IFC: Opcode = Opcode(0x50d);
    /// `MLX5_CMD_OP_QUERY_MAD_DEMUX` = 0x80b.
    pub const QUERY_MAD_DEMUX: Opcode = Opcode(0x80b);
    /// `MLX5_CMD_OP_SET_MAD_DEMUX` = 0x80c.
    pub const SET_MAD_DEMUX: Opcode = Opcode(0x80c);
    /// `MLX5_CMD_OP_NOP` = 0x80d.
    pub const NOP: Opcode = Opcode(0x80d);
    /// `MLX5_CMD_OP_ALLOC_XRCD` = 0x80e.
    pub const ALLOC_XRCD: Opcode = Opcode(0x80e);
    /// `MLX5_CMD_OP_DEALLOC_XRCD` = 0x80f.
    pub const DEALLOC_XRCD: Opcode = Opcode(0x80f);
    /// `MLX5_CMD_OP_ALLOC_TRANSPORT_DOMAIN` = 0x816.
    pub const ALLOC_TRANSPORT_DOMAIN: Opcode = Opcode(0x816);
    /// `MLX5_CMD_OP_DEALLOC_TRANSPORT_DOMAIN` = 0x817.
    pub const DEALLOC_TRANSPORT_DOMAIN: Opcode = Opcode(0x817);
    /// `MLX5_CMD_OP_QUERY_CONG_STATUS` = 0x822.
    pub const QUERY_CONG_STATUS: Opcode = Opcode(0x822);
    /// `MLX5_CMD_OP_MODIFY_CONG_STATUS` = 0x823.
    pub const MODIFY_CONG_STATUS: Opcode = Opcode(0x823);
    /// `MLX5_CMD_OP_QUERY_CONG_PARAMS` = 0x824.
    pub const QUERY_CONG_PARAMS: Opcode = Opcode(0x824);
    /// `MLX5_CMD_OP_MODIFY_CONG_PARAMS` = 0x825.
    pub const MODIFY_CONG_PARAMS: Opcode = Opcode(0x825);
    /// `MLX5_CMD_OP_QUERY_CONG_STATISTICS` = 0x826.
    pub const QUERY_CONG_STATISTICS: Opcode = Opcode(0x826);
    /// `MLX5_CMD_OP_ADD_VXLAN_UDP_DPORT` = 0x827.
    pub const ADD_VXLAN_UDP_DPORT: Opcode = Opcode(0x827);
    /// `MLX5_CMD_OP_DELETE_VXLAN_UDP_DPORT` = 0x828.
    pub const DELETE_VXLAN_UDP_DPORT: Opcode = Opcode(0x828);
    /// `MLX5_CMD_OP_SET_L2_TABLE_ENTRY` = 0x829.
    pub const SET_L2_TABLE_ENTRY: Opcode = Opcode(0x829);
    /// `MLX5_CMD_OP_QUERY_L2_TABLE_ENTRY` = 0x82a.
    pub const QUERY_L2_TABLE_ENTRY: Opcode = Opcode(0x82a);
    /// `MLX5_CMD_OP_DELETE_L2_TABLE_ENTRY` = 0x82b.
    pub const DELETE_L2_TABLE_ENTRY: Opcode = Opcode(0x82b);
    /// `MLX5_CMD_OP_SET_WOL_ROL` = 0x830.
    pub const SET_WOL_ROL: Opcode = Opcode(0x830);
    /// `MLX5_CMD_OP_QUERY_WOL_ROL` = 0x831.
    pub const QUERY_WOL_ROL: Opcode = Opcode(0x831);
    /// `MLX5_CMD_OP_CREATE_LAG` = 0x840.
    pub const CREATE_LAG: Opcode = Opcode(0x840);
    /// `MLX5_CMD_OP_MODIFY_LAG` = 0x841.
    pub const MODIFY_LAG: Opcode = Opcode(0x841);
    /// `MLX5_CMD_OP_QUERY_LAG` = 0x842.
    pub const QUERY_LAG: Opcode = Opcode(0x842);
    /// `MLX5_CMD_OP_DESTROY_LAG` = 0x843.
    pub const DESTROY_LAG: Opcode = Opcode(0x843);
    /// `MLX5_CMD_OP_CREATE_VPORT_LAG` = 0x844.
    pub const CREATE_VPORT_LAG: Opcode = Opcode(0x844);
    /// `MLX5_CMD_OP_DESTROY_VPORT_LAG` = 0x845.
    pub const DESTROY_VPORT_LAG: Opcode = Opcode(0x845);
    /// `MLX5_CMD_OP_CREATE_TIR` = 0x900.
    pub const CREATE_TIR: Opcode = Opcode(0x900);
    /// `MLX5_CMD_OP_MODIFY_TIR` = 0x901.
    pub const MODIFY_TIR: Opcode = Opcode(0x901);
    /// `MLX5_CMD_OP_DESTROY_TIR` = 0x902.
    pub const DESTROY_TIR: Opcode = Opcode(0x902);
    /// `MLX5_CMD_OP_QUERY_TIR` = 0x903.
    pub const QUERY_TIR: Opcode = Opcode(0x903);
    /// `MLX5_CMD_OP_CREATE_SQ` = 0x904.
    pub const CREATE_SQ: Opcode = Opcode(0x904);
    /// `MLX5_CMD_OP_MODIFY_SQ` = 0x905.
    pub const MODIFY_SQ: Opcode = Opcode(0x905);
    /// `MLX5_CMD_OP_DESTROY_SQ` = 0x906.
    pub const DESTROY_SQ: Opcode = Opcode(0x906);
    /// `MLX5_CMD_OP_QUERY_SQ` = 0x907.
    pub const QUERY_SQ: Opcode = Opcode(0x907);
    /// `MLX5_CMD_OP_CREATE_RQ` = 0x908.
    pub const CREATE_RQ: Opcode = Opcode(0x908);
    /// `MLX5_CMD_OP_MODIFY_RQ` = 0x909.
    pub const MODIFY_RQ: Opcode = Opcode(0x909);
    /// `MLX5_CMD_OP_SET_DELAY_DROP_PARAMS` = 0x910.
    pub const SET_DELAY_DROP_PARAMS: Opcode = Opcode(0x910);
    /// `MLX5_CMD_OP_DESTROY_RQ` = 0x90a.
    pub const DESTROY_RQ: Opcode = Opcode(0x90a);
    /// `MLX5_CMD_OP_QUERY_RQ` = 0x90b.
    pub const QUERY_RQ: Opcode = Opcode(0x90b);
    /// `MLX5_CMD_OP_CREATE_RMP` = 0x90c.
    pub const CREATE_RMP: Opcode = Opcode(0x90c);
    /// `MLX5_CMD_OP_MODIFY_RMP` = 0x90d.
    pub const MODIFY_RMP: Opcode = Opcode(0x90d);
    /// `MLX5_CMD_OP_DESTROY_RMP` = 0x90e.
    pub const DESTROY_RMP: Opcode = Opcode(0x90e);
    /// `MLX5_CMD_OP_QUERY_RMP` = 0x90f.
    pub const QUERY_RMP: Opcode = Opcode(0x90f);
    /// `MLX5_CMD_OP_CREATE_TIS` = 0x912.
    pub const CREATE_TIS: Opcode = Opcode(0x912);
    /// `MLX5_CMD_OP_MODIFY_TIS` = 0x913.
    pub const MODIFY_TIS: Opcode = Opcode(0x913);
    /// `MLX5_CMD_OP_DESTROY_TIS` = 0x914.
    pub const DESTROY_TIS: Opcode = Opcode(0x914);
    /// `MLX5_CMD_OP_QUERY_TIS` = 0x915.
    pub const QUERY_TIS: Opcode = Opcode(0x915);
    /// `MLX5_CMD_OP_CREATE_RQT` = 0x916.
    pub const CREATE_RQT: Opcode = Opcode(0x916);
    /// `MLX5_CMD_OP_MODIFY_RQT` = 0x917.
    pub const MODIFY_RQT: Opcode = Opcode(0x917);
    /// `MLX5_CMD_OP_DESTROY_RQT` = 0x918.
    pub const DESTROY_RQT: Opcode = Opcode(0x918);
    /// `MLX5_CMD_OP_QUERY_RQT` = 0x919.
    pub const QUERY_RQT: Opcode = Opcode(0x919);
    /// `MLX5_CMD_OP_SET_FLOW_TABLE_ROOT` = 0x92f.
    pub const SET_FLOW_TABLE_ROOT: Opcode = Opcode(0x92f);
    /// `MLX5_CMD_OP_CREATE_FLOW_TABLE` = 0x930.
    pub const CREATE_FLOW_TABLE: Opcode = Opcode(0x930);
    /// `MLX5_CMD_OP_DESTROY_FLOW_TABLE` = 0x931.
    pub const DESTROY_FLOW_TABLE: Opcode = Opcode(0x931);
    /// `MLX5_CMD_OP_QUERY_FLOW_TABLE` = 0x932.
    pub const QUERY_FLOW_TABLE: Opcode = Opcode(0x932);
    /// `MLX5_CMD_OP_CREATE_FLOW_GROUP` = 0x933.
    pub const CREATE_FLOW_GROUP: Opcode = Opcode(0x933);
    /// `MLX5_CMD_OP_DESTROY_FLOW_GROUP` = 0x934.
    pub const DESTROY_FLOW_GROUP: Opcode = Opcode(0x934);
    /// `MLX5_CMD_OP_QUERY_FLOW_GROUP` = 0x935.
    pub const QUERY_FLOW_GROUP: Opcode = Opcode(0x935);
    /// `MLX5_CMD_OP_SET_FLOW_TABLE_ENTRY` = 0x936.
    pub const SET_FLOW_TABLE_ENTRY: Opcode = Opcode(0x936);
    /// `MLX5_CMD_OP_QUERY_FLOW_TABLE_ENTRY` = 0x937.
    pub const QUERY_FLOW_TABLE_ENTRY: Opcode = Opcode(0x937);
    /// `MLX5_CMD_OP_DELETE_FLOW_TABLE_ENTRY` = 0x938.
    pub const DELETE_FLOW_TABLE_ENTRY: Opcode = Opcode(0x938);
    /// `MLX5_CMD_OP_ALLOC_FLOW_COUNTER` = 0x939.
    pub const ALLOC_FLOW_COUNTER: Opcode = Opcode(0x939);
    /// `MLX5_CMD_OP_DEALLOC_FLOW_COUNTER` = 0x93a.
    pub const DEALLOC_FLOW_COUNTER: Opcode = Opcode(0x93a);
    /// `MLX5_CMD_OP_QUERY_FLOW_COUNTER` = 0x93b.
    pub const QUERY_FLOW_COUNTER: Opcode = Opcode(0x93b);
    /// `MLX5_CMD_OP_MODIFY_FLOW_TABLE` = 0x93c.
    pub const MODIFY_FLOW_TABLE: Opcode = Opcode(0x93c);
    /// `MLX5_CMD_OP_ALLOC_PACKET_REFORMAT_CONTEXT` = 0x93d.
    pub const ALLOC_PACKET_REFORMAT_CONTEXT: Opcode = Opcode(0x93d);
    /// `MLX5_CMD_OP_DEALLOC_PACKET_REFORMAT_CONTEXT` = 0x93e.
    pub const DEALLOC_PACKET_REFORMAT_CONTEXT: Opcode = Opcode(0x93e);
    /// `MLX5_CMD_OP_QUERY_PACKET_REFORMAT_CONTEXT` = 0x93f.
    pub const QUERY_PACKET_REFORMAT_CONTEXT: Opcode = Opcode(0x93f);
    /// `MLX5_CMD_OP_ALLOC_MODIFY_HEADER_CONTEXT` = 0x940.
    pub const ALLOC_MODIFY_HEADER_CONTEXT: Opcode = Opcode(0x940);
    /// `MLX5_CMD_OP_DEALLOC_MODIFY_HEADER_CONTEXT` = 0x941.
    pub const DEALLOC_MODIFY_HEADER_CONTEXT: Opcode = Opcode(0x941);
    /// `MLX5_CMD_OP_QUERY_MODIFY_HEADER_CONTEXT` = 0x942.
    pub const QUERY_MODIFY_HEADER_CONTEXT: Opcode = Opcode(0x942);
    /// `MLX5_CMD_OP_FPGA_CREATE_QP` = 0x960.
    pub const FPGA_CREATE_QP: Opcode = Opcode(0x960);
    /// `MLX5_CMD_OP_FPGA_MODIFY_QP` = 0x961.
    pub const FPGA_MODIFY_QP: Opcode = Opcode(0x961);
    /// `MLX5_CMD_OP_FPGA_QUERY_QP` = 0x962.
    pub const FPGA_QUERY_QP: Opcode = Opcode(0x962);
    /// `MLX5_CMD_OP_FPGA_DESTROY_QP` = 0x963.
    pub const FPGA_DESTROY_QP: Opcode = Opcode(0x963);
    /// `MLX5_CMD_OP_FPGA_QUERY_QP_COUNTERS` = 0x964.
    pub const FPGA_QUERY_QP_COUNTERS: Opcode = Opcode(0x964);
    /// `MLX5_CMD_OP_CREATE_GENERAL_OBJECT` = 0xa00.
    pub const CREATE_GENERAL_OBJECT: Opcode = Opcode(0xa00);
    /// `MLX5_CMD_OP_MODIFY_GENERAL_OBJECT` = 0xa01.
    pub const MODIFY_GENERAL_OBJECT: Opcode = Opcode(0xa01);
    /// `MLX5_CMD_OP_QUERY_GENERAL_OBJECT` = 0xa02.
    pub const QUERY_GENERAL_OBJECT: Opcode = Opcode(0xa02);
    /// `MLX5_CMD_OP_DESTROY_GENERAL_OBJECT` = 0xa03.
    pub const DESTROY_GENERAL_OBJECT: Opcode = Opcode(0xa03);
    /// `MLX5_CMD_OP_CREATE_UCTX` = 0xa04.
    pub const CREATE_UCTX: Opcode = Opcode(0xa04);
    /// `MLX5_CMD_OP_DESTROY_UCTX` = 0xa06.
    pub const DESTROY_UCTX: Opcode = Opcode(0xa06);
    /// `MLX5_CMD_OP_CREATE_UMEM` = 0xa08.
    pub const CREATE_UMEM: Opcode = Opcode(0xa08);
    /// `MLX5_CMD_OP_DESTROY_UMEM` = 0xa0a.
    pub const DESTROY_UMEM: Opcode = Opcode(0xa0a);
    /// `MLX5_CMD_OP_SYNC_STEERING` = 0xb00.
    pub const SYNC_STEERING: Opcode = Opcode(0xb00);
    /// `MLX5_CMD_OP_QUERY_VHCA_STATE` = 0xb0d.
    pub const QUERY_VHCA_STATE: Opcode = Opcode(0xb0d);
    /// `MLX5_CMD_OP_MODIFY_VHCA_STATE` = 0xb0e.
    pub const MODIFY_VHCA_STATE: Opcode = Opcode(0xb0e);
    /// `MLX5_CMD_OP_CREATE_FLOW_COUNTER` = 0x939 (rdma-core v59; not in Linux 6.1's header).
    pub const CREATE_FLOW_COUNTER: Opcode = Opcode(0x939);
    /// Every constant above with its C name, and whether it comes from
    /// rdma-core v59's header rather than Linux 6.1's.
    pub const ALL: &'static [(&'static str, Opcode, bool)] = &[
        ("MLX5_CMD_OP_QUERY_HCA_CAP", Opcode::QUERY_HCA_CAP, false),
        ("MLX5_CMD_OP_QUERY_ADAPTER", Opcode::QUERY_ADAPTER, false),
        ("MLX5_CMD_OP_INIT_HCA", Opcode::INIT_HCA, false),
        ("MLX5_CMD_OP_TEARDOWN_HCA", Opcode::TEARDOWN_HCA, false),
        ("MLX5_CMD_OP_ENABLE_HCA", Opcode::ENABLE_HCA, false),
        ("MLX5_CMD_OP_DISABLE_HCA", Opcode::DISABLE_HCA, false),
        ("MLX5_CMD_OP_QUERY_PAGES", Opcode::QUERY_PAGES, false),
        ("MLX5_CMD_OP_MANAGE_PAGES", Opcode::MANAGE_PAGES, false),
        ("MLX5_CMD_OP_SET_HCA_CAP", Opcode::SET_HCA_CAP, false),
        ("MLX5_CMD_OP_QUERY_ISSI", Opcode::QUERY_ISSI, false),
        ("MLX5_CMD_OP_SET_ISSI", Opcode::SET_ISSI, false),
        ("MLX5_CMD_OP_SET_DRIVER_VERSION", Opcode::SET_DRIVER_VERSION, false),
        ("MLX5_CMD_OP_QUERY_SF_PARTITION", Opcode::QUERY_SF_PARTITION, false),
        ("MLX5_CMD_OP_ALLOC_SF", Opcode::ALLOC_SF, false),
        ("MLX5_CMD_OP_DEALLOC_SF", Opcode::DEALLOC_SF, false),
        ("MLX5_CMD_OP_SUSPEND_VHCA", Opcode::SUSPEND_VHCA, false),
        ("MLX5_CMD_OP_RESUME_VHCA", Opcode::RESUME_VHCA, false),
        ("MLX5_CMD_OP_QUERY_VHCA_MIGRATION_STATE", Opcode::QUERY_VHCA_MIGRATION_STATE, false),
        ("MLX5_CMD_OP_SAVE_VHCA_STATE", Opcode::SAVE_VHCA_STATE, false),
        ("MLX5_CMD_OP_LOAD_VHCA_STATE", Opcode::LOAD_VHCA_STATE, false),
        ("MLX5_CMD_OP_CREATE_MKEY", Opcode::CREATE_MKEY, false),
        ("MLX5_CMD_OP_QUERY_MKEY", Opcode::QUERY_MKEY, false),
        ("MLX5_CMD_OP_DESTROY_MKEY", Opcode::DESTROY_MKEY, false),
        ("MLX5_CMD_OP_QUERY_SPECIAL_CONTEXTS", Opcode::QUERY_SPECIAL_CONTEXTS, false),
        ("MLX5_CMD_OP_PAGE_FAULT_RESUME", Opcode::PAGE_FAULT_RESUME, false),
        ("MLX5_CMD_OP_ALLOC_MEMIC", Opcode::ALLOC_MEMIC, false),
        ("MLX5_CMD_OP_DEALLOC_MEMIC", Opcode::DEALLOC_MEMIC, false),
        ("MLX5_CMD_OP_MODIFY_MEMIC", Opcode::MODIFY_MEMIC, false),
        ("MLX5_CMD_OP_CREATE_EQ", Opcode::CREATE_EQ, false),
        ("MLX5_CMD_OP_DESTROY_EQ", Opcode::DESTROY_EQ, false),
        ("MLX5_CMD_OP_QUERY_EQ", Opcode::QUERY_EQ, false),
        ("MLX5_CMD_OP_GEN_EQE", Opcode::GEN_EQE, false),
        ("MLX5_CMD_OP_CREATE_CQ", Opcode::CREATE_CQ, false),
        ("MLX5_CMD_OP_DESTROY_CQ", Opcode::DESTROY_CQ, false),
        ("MLX5_CMD_OP_QUERY_CQ", Opcode::QUERY_CQ, false),
        ("MLX5_CMD_OP_MODIFY_CQ", Opcode::MODIFY_CQ, false),
        ("MLX5_CMD_OP_CREATE_QP", Opcode::CREATE_QP, false),
        ("MLX5_CMD_OP_DESTROY_QP", Opcode::DESTROY_QP, false),
        ("MLX5_CMD_OP_RST2INIT_QP", Opcode::RST2INIT_QP, false),
        ("MLX5_CMD_OP_INIT2RTR_QP", Opcode::INIT2RTR_QP, false),
        ("MLX5_CMD_OP_RTR2RTS_QP", Opcode::RTR2RTS_QP, false),
        ("MLX5_CMD_OP_RTS2RTS_QP", Opcode::RTS2RTS_QP, false),
        ("MLX5_CMD_OP_SQERR2RTS_QP", Opcode::SQERR2RTS_QP, false),
        ("MLX5_CMD_OP_2ERR_QP", Opcode::_2ERR_QP, false),
        ("MLX5_CMD_OP_2RST_QP", Opcode::_2RST_QP, false),
        ("MLX5_CMD_OP_QUERY_QP", Opcode::QUERY_QP, false),
        ("MLX5_CMD_OP_SQD_RTS_QP", Opcode::SQD_RTS_QP, false),
        ("MLX5_CMD_OP_INIT2INIT_QP", Opcode::INIT2INIT_QP, false),
        ("MLX5_CMD_OP_CREATE_PSV", Opcode::CREATE_PSV, false),
        ("MLX5_CMD_OP_DESTROY_PSV", Opcode::DESTROY_PSV, false),
        ("MLX5_CMD_OP_CREATE_SRQ", Opcode::CREATE_SRQ, false),
        ("MLX5_CMD_OP_DESTROY_SRQ", Opcode::DESTROY_SRQ, false),
        ("MLX5_CMD_OP_QUERY_SRQ", Opcode::QUERY_SRQ, false),
        ("MLX5_CMD_OP_ARM_RQ", Opcode::ARM_RQ, false),
        ("MLX5_CMD_OP_CREATE_XRC_SRQ", Opcode::CREATE_XRC_SRQ, false),
        ("MLX5_CMD_OP_DESTROY_XRC_SRQ", Opcode::DESTROY_XRC_SRQ, false),
        ("MLX5_CMD_OP_QUERY_XRC_SRQ", Opcode::QUERY_XRC_SRQ, false),
        ("MLX5_CMD_OP_ARM_XRC_SRQ", Opcode::ARM_XRC_SRQ, false),
        ("MLX5_CMD_OP_CREATE_DCT", Opcode::CREATE_DCT, false),
        ("MLX5_CMD_OP_DESTROY_DCT", Opcode::DESTROY_DCT, false),
        ("MLX5_CMD_OP_DRAIN_DCT", Opcode::DRAIN_DCT, false),
        ("MLX5_CMD_OP_QUERY_DCT", Opcode::QUERY_DCT, false),
        ("MLX5_CMD_OP_ARM_DCT_FOR_KEY_VIOLATION", Opcode::ARM_DCT_FOR_KEY_VIOLATION, false),
        ("MLX5_CMD_OP_CREATE_XRQ", Opcode::CREATE_XRQ, false),
        ("MLX5_CMD_OP_DESTROY_XRQ", Opcode::DESTROY_XRQ, false),
        ("MLX5_CMD_OP_QUERY_XRQ", Opcode::QUERY_XRQ, false),
        ("MLX5_CMD_OP_ARM_XRQ", Opcode::ARM_XRQ, false),
        ("MLX5_CMD_OP_QUERY_XRQ_DC_PARAMS_ENTRY", Opcode::QUERY_XRQ_DC_PARAMS_ENTRY, false),
        ("MLX5_CMD_OP_SET_XRQ_DC_PARAMS_ENTRY", Opcode::SET_XRQ_DC_PARAMS_ENTRY, false),
        ("MLX5_CMD_OP_QUERY_XRQ_ERROR_PARAMS", Opcode::QUERY_XRQ_ERROR_PARAMS, false),
        ("MLX5_CMD_OP_RELEASE_XRQ_ERROR", Opcode::RELEASE_XRQ_ERROR, false),
        ("MLX5_CMD_OP_MODIFY_XRQ", Opcode::MODIFY_XRQ, false),
        ("MLX5_CMD_OP_QUERY_ESW_FUNCTIONS", Opcode::QUERY_ESW_FUNCTIONS, false),
        ("MLX5_CMD_OP_QUERY_VPORT_STATE", Opcode::QUERY_VPORT_STATE, false),
        ("MLX5_CMD_OP_MODIFY_VPORT_STATE", Opcode::MODIFY_VPORT_STATE, false),
        ("MLX5_CMD_OP_QUERY_ESW_VPORT_CONTEXT", Opcode::QUERY_ESW_VPORT_CONTEXT, false),
        ("MLX5_CMD_OP_MODIFY_ESW_VPORT_CONTEXT", Opcode::MODIFY_ESW_VPORT_CONTEXT, false),
        ("MLX5_CMD_OP_QUERY_NIC_VPORT_CONTEXT", Opcode::QUERY_NIC_VPORT_CONTEXT, false),
        ("MLX5_CMD_OP_MODIFY_NIC_VPORT_CONTEXT", Opcode::MODIFY_NIC_VPORT_CONTEXT, false),
        ("MLX5_CMD_OP_QUERY_ROCE_ADDRESS", Opcode::QUERY_ROCE_ADDRESS, false),
        ("MLX5_CMD_OP_SET_ROCE_ADDRESS", Opcode::SET_ROCE_ADDRESS, false),
        ("MLX5_CMD_OP_QUERY_HCA_VPORT_CONTEXT", Opcode::QUERY_HCA_VPORT_CONTEXT, false),
        ("MLX5_CMD_OP_MODIFY_HCA_VPORT_CONTEXT", Opcode::MODIFY_HCA_VPORT_CONTEXT, false),
        ("MLX5_CMD_OP_QUERY_HCA_VPORT_GID", Opcode::QUERY_HCA_VPORT_GID, false),
        ("MLX5_CMD_OP_QUERY_HCA_VPORT_PKEY", Opcode::QUERY_HCA_VPORT_PKEY, false),
        ("MLX5_CMD_OP_QUERY_VNIC_ENV", Opcode::QUERY_VNIC_ENV, false),
        ("MLX5_CMD_OP_QUERY_VPORT_COUNTER", Opcode::QUERY_VPORT_COUNTER, false),
        ("MLX5_CMD_OP_ALLOC_Q_COUNTER", Opcode::ALLOC_Q_COUNTER, false),
        ("MLX5_CMD_OP_DEALLOC_Q_COUNTER", Opcode::DEALLOC_Q_COUNTER, false),
        ("MLX5_CMD_OP_QUERY_Q_COUNTER", Opcode::QUERY_Q_COUNTER, false),
        ("MLX5_CMD_OP_SET_MONITOR_COUNTER", Opcode::SET_MONITOR_COUNTER, false),
        ("MLX5_CMD_OP_ARM_MONITOR_COUNTER", Opcode::ARM_MONITOR_COUNTER, false),
        ("MLX5_CMD_OP_SET_PP_RATE_LIMIT", Opcode::SET_PP_RATE_LIMIT, false),
        ("MLX5_CMD_OP_QUERY_RATE_LIMIT", Opcode::QUERY_RATE_LIMIT, false),
        ("MLX5_CMD_OP_CREATE_SCHEDULING_ELEMENT", Opcode::CREATE_SCHEDULING_ELEMENT, false),
        ("MLX5_CMD_OP_DESTROY_SCHEDULING_ELEMENT", Opcode::DESTROY_SCHEDULING_ELEMENT, false),
        ("MLX5_CMD_OP_QUERY_SCHEDULING_ELEMENT", Opcode::QUERY_SCHEDULING_ELEMENT, false),
        ("MLX5_CMD_OP_MODIFY_SCHEDULING_ELEMENT", Opcode::MODIFY_SCHEDULING_ELEMENT, false),
        ("MLX5_CMD_OP_CREATE_QOS_PARA_VPORT", Opcode::CREATE_QOS_PARA_VPORT, false),
        ("MLX5_CMD_OP_DESTROY_QOS_PARA_VPORT", Opcode::DESTROY_QOS_PARA_VPORT, false),
        ("MLX5_CMD_OP_ALLOC_PD", Opcode::ALLOC_PD, false),
        ("MLX5_CMD_OP_DEALLOC_PD", Opcode::DEALLOC_PD, false),
        ("MLX5_CMD_OP_ALLOC_UAR", Opcode::ALLOC_UAR, false),
        ("MLX5_CMD_OP_DEALLOC_UAR", Opcode::DEALLOC_UAR, false),
        ("MLX5_CMD_OP_CONFIG_INT_MODERATION", Opcode::CONFIG_INT_MODERATION, false),
        ("MLX5_CMD_OP_ACCESS_REG", Opcode::ACCESS_REG, false),
        ("MLX5_CMD_OP_ATTACH_TO_MCG", Opcode::ATTACH_TO_MCG, false),
        ("MLX5_CMD_OP_DETACH_FROM_MCG", Opcode::DETACH_FROM_MCG, false),
        ("MLX5_CMD_OP_GET_DROPPED_PACKET_LOG", Opcode::GET_DROPPED_PACKET_LOG, false),
        ("MLX5_CMD_OP_MAD_IFC", Opcode::MAD_IFC, false),
        ("MLX5_CMD_OP_QUERY_MAD_DEMUX", Opcode::QUERY_MAD_DEMUX, false),
        ("MLX5_CMD_OP_SET_MAD_DEMUX", Opcode::SET_MAD_DEMUX, false),
        ("MLX5_CMD_OP_NOP", Opcode::NOP, false),
        ("MLX5_CMD_OP_ALLOC_XRCD", Opcode::ALLOC_XRCD, false),
        ("MLX5_CMD_OP_DEALLOC_XRCD", Opcode::DEALLOC_XRCD, false),
        ("MLX5_CMD_OP_ALLOC_TRANSPORT_DOMAIN", Opcode::ALLOC_TRANSPORT_DOMAIN, false),
        ("MLX5_CMD_OP_DEALLOC_TRANSPORT_DOMAIN", Opcode::DEALLOC_TRANSPORT_DOMAIN, false),
        ("MLX5_CMD_OP_QUERY_CONG_STATUS", Opcode::QUERY_CONG_STATUS, false),
        ("MLX5_CMD_OP_MODIFY_CONG_STATUS", Opcode::MODIFY_CONG_STATUS, false),
        ("MLX5_CMD_OP_QUERY_CONG_PARAMS", Opcode::QUERY_CONG_PARAMS, false),
        ("MLX5_CMD_OP_MODIFY_CONG_PARAMS", Opcode::MODIFY_CONG_PARAMS, false),
        ("MLX5_CMD_OP_QUERY_CONG_STATISTICS", Opcode::QUERY_CONG_STATISTICS, false),
        ("MLX5_CMD_OP_ADD_VXLAN_UDP_DPORT", Opcode::ADD_VXLAN_UDP_DPORT, false),
        ("MLX5_CMD_OP_DELETE_VXLAN_UDP_DPORT", Opcode::DELETE_VXLAN_UDP_DPORT, false),
        ("MLX5_CMD_OP_SET_L2_TABLE_ENTRY", Opcode::SET_L2_TABLE_ENTRY, false),
        ("MLX5_CMD_OP_QUERY_L2_TABLE_ENTRY", Opcode::QUERY_L2_TABLE_ENTRY, false),
        ("MLX5_CMD_OP_DELETE_L2_TABLE_ENTRY", Opcode::DELETE_L2_TABLE_ENTRY, false),
        ("MLX5_CMD_OP_SET_WOL_ROL", Opcode::SET_WOL_ROL, false),
        ("MLX5_CMD_OP_QUERY_WOL_ROL", Opcode::QUERY_WOL_ROL, false),
        ("MLX5_CMD_OP_CREATE_LAG", Opcode::CREATE_LAG, false),
        ("MLX5_CMD_OP_MODIFY_LAG", Opcode::MODIFY_LAG, false),
        ("MLX5_CMD_OP_QUERY_LAG", Opcode::QUERY_LAG, false),
        ("MLX5_CMD_OP_DESTROY_LAG", Opcode::DESTROY_LAG, false),
        ("MLX5_CMD_OP_CREATE_VPORT_LAG", Opcode::CREATE_VPORT_LAG, false),
        ("MLX5_CMD_OP_DESTROY_VPORT_LAG", Opcode::DESTROY_VPORT_LAG, false),
        ("MLX5_CMD_OP_CREATE_TIR", Opcode::CREATE_TIR, false),
        ("MLX5_CMD_OP_MODIFY_TIR", Opcode::MODIFY_TIR, false),
        ("MLX5_CMD_OP_DESTROY_TIR", Opcode::DESTROY_TIR, false),
        ("MLX5_CMD_OP_QUERY_TIR", Opcode::QUERY_TIR, false),
        ("MLX5_CMD_OP_CREATE_SQ", Opcode::CREATE_SQ, false),
        ("MLX5_CMD_OP_MODIFY_SQ", Opcode::MODIFY_SQ, false),
        ("MLX5_CMD_OP_DESTROY_SQ", Opcode::DESTROY_SQ, false),
        ("MLX5_CMD_OP_QUERY_SQ", Opcode::QUERY_SQ, false),
        ("MLX5_CMD_OP_CREATE_RQ", Opcode::CREATE_RQ, false),
        ("MLX5_CMD_OP_MODIFY_RQ", Opcode::MODIFY_RQ, false),
        ("MLX5_CMD_OP_SET_DELAY_DROP_PARAMS", Opcode::SET_DELAY_DROP_PARAMS, false),
        ("MLX5_CMD_OP_DESTROY_RQ", Opcode::DESTROY_RQ, false),
        ("MLX5_CMD_OP_QUERY_RQ", Opcode::QUERY_RQ, false),
        ("MLX5_CMD_OP_CREATE_RMP", Opcode::CREATE_RMP, false),
        ("MLX5_CMD_OP_MODIFY_RMP", Opcode::MODIFY_RMP, false),
        ("MLX5_CMD_OP_DESTROY_RMP", Opcode::DESTROY_RMP, false),
        ("MLX5_CMD_OP_QUERY_RMP", Opcode::QUERY_RMP, false),
        ("MLX5_CMD_OP_CREATE_TIS", Opcode::CREATE_TIS, false),
        ("MLX5_CMD_OP_MODIFY_TIS", Opcode::MODIFY_TIS, false),
        ("MLX5_CMD_OP_DESTROY_TIS", Opcode::DESTROY_TIS, false),
        ("MLX5_CMD_OP_QUERY_TIS", Opcode::QUERY_TIS, false),
        ("MLX5_CMD_OP_CREATE_RQT", Opcode::CREATE_RQT, false),
        ("MLX5_CMD_OP_MODIFY_RQT", Opcode::MODIFY_RQT, false),
        ("MLX5_CMD_OP_DESTROY_RQT", Opcode::DESTROY_RQT, false),
        ("MLX5_CMD_OP_QUERY_RQT", Opcode::QUERY_RQT, false),
        ("MLX5_CMD_OP_SET_FLOW_TABLE_ROOT", Opcode::SET_FLOW_TABLE_ROOT, false),
        ("MLX5_CMD_OP_CREATE_FLOW_TABLE", Opcode::CREATE_FLOW_TABLE, false),
        ("MLX5_CMD_OP_DESTROY_FLOW_TABLE", Opcode::DESTROY_FLOW_TABLE, false),
        ("MLX5_CMD_OP_QUERY_FLOW_TABLE", Opcode::QUERY_FLOW_TABLE, false),
        ("MLX5_CMD_OP_CREATE_FLOW_GROUP", Opcode::CREATE_FLOW_GROUP, false),
        ("MLX5_CMD_OP_DESTROY_FLOW_GROUP", Opcode::DESTROY_FLOW_GROUP, false),
        ("MLX5_CMD_OP_QUERY_FLOW_GROUP", Opcode::QUERY_FLOW_GROUP, false),
        ("MLX5_CMD_OP_SET_FLOW_TABLE_ENTRY", Opcode::SET_FLOW_TABLE_ENTRY, false),
        ("MLX5_CMD_OP_QUERY_FLOW_TABLE_ENTRY", Opcode::QUERY_FLOW_TABLE_ENTRY, false),
        ("MLX5_CMD_OP_DELETE_FLOW_TABLE_ENTRY", Opcode::DELETE_FLOW_TABLE_ENTRY, false),
        ("MLX5_CMD_OP_ALLOC_FLOW_COUNTER", Opcode::ALLOC_FLOW_COUNTER, false),
        ("MLX5_CMD_OP_DEALLOC_FLOW_COUNTER", Opcode::DEALLOC_FLOW_COUNTER, false),
        ("MLX5_CMD_OP_QUERY_FLOW_COUNTER", Opcode::QUERY_FLOW_COUNTER, false),
        ("MLX5_CMD_OP_MODIFY_FLOW_TABLE", Opcode::MODIFY_FLOW_TABLE, false),
        ("MLX5_CMD_OP_ALLOC_PACKET_REFORMAT_CONTEXT", Opcode::ALLOC_PACKET_REFORMAT_CONTEXT, false),
        ("MLX5_CMD_OP_DEALLOC_PACKET_REFORMAT_CONTEXT", Opcode::DEALLOC_PACKET_REFORMAT_CONTEXT, false),
        ("MLX5_CMD_OP_QUERY_PACKET_REFORMAT_CONTEXT", Opcode::QUERY_PACKET_REFORMAT_CONTEXT, false),
        ("MLX5_CMD_OP_ALLOC_MODIFY_HEADER_CONTEXT", Opcode::ALLOC_MODIFY_HEADER_CONTEXT, false),
        ("MLX5_CMD_OP_DEALLOC_MODIFY_HEADER_CONTEXT", Opcode::DEALLOC_MODIFY_HEADER_CONTEXT, false),
        ("MLX5_CMD_OP_QUERY_MODIFY_HEADER_CONTEXT", Opcode::QUERY_MODIFY_HEADER_CONTEXT, false),
        ("MLX5_CMD_OP_FPGA_CREATE_QP", Opcode::FPGA_CREATE_QP, false),
        ("MLX5_CMD_OP_FPGA_MODIFY_QP", Opcode::FPGA_MODIFY_QP, false),
        ("MLX5_CMD_OP_FPGA_QUERY_QP", Opcode::FPGA_QUERY_QP, false),
        ("MLX5_CMD_OP_FPGA_DESTROY_QP", Opcode::FPGA_DESTROY_QP, false),
        ("MLX5_CMD_OP_FPGA_QUERY_QP_COUNTERS", Opcode::FPGA_QUERY_QP_COUNTERS, false),
        ("MLX5_CMD_OP_CREATE_GENERAL_OBJECT", Opcode::CREATE_GENERAL_OBJECT, false),
        ("MLX5_CMD_OP_MODIFY_GENERAL_OBJECT", Opcode::MODIFY_GENERAL_OBJECT, false),
        ("MLX5_CMD_OP_QUERY_GENERAL_OBJECT", Opcode::QUERY_GENERAL_OBJECT, false),
        ("MLX5_CMD_OP_DESTROY_GENERAL_OBJECT", Opcode::DESTROY_GENERAL_OBJECT, false),
        ("MLX5_CMD_OP_CREATE_UCTX", Opcode::CREATE_UCTX, false),
        ("MLX5_CMD_OP_DESTROY_UCTX", Opcode::DESTROY_UCTX, false),
        ("MLX5_CMD_OP_CREATE_UMEM", Opcode::CREATE_UMEM, false),
        ("MLX5_CMD_OP_DESTROY_UMEM", Opcode::DESTROY_UMEM, false),
        ("MLX5_CMD_OP_SYNC_STEERING", Opcode::SYNC_STEERING, false),
        ("MLX5_CMD_OP_QUERY_VHCA_STATE", Opcode::QUERY_VHCA_STATE, false),
        ("MLX5_CMD_OP_MODIFY_VHCA_STATE", Opcode::MODIFY_VHCA_STATE, false),
        ("MLX5_CMD_OP_CREATE_FLOW_COUNTER", Opcode::CREATE_FLOW_COUNTER, true),
    ];
}

/// A capability group (`enum mlx5_cap_type`): what `QUERY_HCA_CAP` returns,
/// chosen by its `op_mod` ([`CapType::op_mod`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CapType(pub u16);

impl CapType {
    /// `MLX5_CAP_GENERAL` = 0x0.
    pub const GENERAL: CapType = CapType(0x0);
    /// `MLX5_CAP_ETHERNET_OFFLOADS` = 0x1.
    pub const ETHERNET_OFFLOADS: CapType = CapType(0x1);
    /// `MLX5_CAP_ODP` = 0x2.
    pub const ODP: CapType = CapType(0x2);
    /// `MLX5_CAP_ATOMIC` = 0x3.
    pub const ATOMIC: CapType = CapType(0x3);
    /// `MLX5_CAP_ROCE` = 0x4.
    pub const ROCE: CapType = CapType(0x4);
    /// `MLX5_CAP_IPOIB_OFFLOADS` = 0x5.
    pub const IPOIB_OFFLOADS: CapType = CapType(0x5);
    /// `MLX5_CAP_IPOIB_ENHANCED_OFFLOADS` = 0x6.
    pub const IPOIB_ENHANCED_OFFLOADS: CapType = CapType(0x6);
    /// `MLX5_CAP_FLOW_TABLE` = 0x7.
    pub const FLOW_TABLE: CapType = CapType(0x7);
    /// `MLX5_CAP_ESWITCH_FLOW_TABLE` = 0x8.
    pub const ESWITCH_FLOW_TABLE: CapType = CapType(0x8);
    /// `MLX5_CAP_ESWITCH` = 0x9.
    pub const ESWITCH: CapType = CapType(0x9);
    /// `MLX5_CAP_VECTOR_CALC` = 0xb.
    pub const VECTOR_CALC: CapType = CapType(0xb);
    /// `MLX5_CAP_QOS` = 0xc.
    pub const QOS: CapType = CapType(0xc);
    /// `MLX5_CAP_DEBUG` = 0xd.
    pub const DEBUG: CapType = CapType(0xd);
    /// `MLX5_CAP_DEV_MEM` = 0xf.
    pub const DEV_MEM: CapType = CapType(0xf);
    /// `MLX5_CAP_TLS` = 0x11.
    pub const TLS: CapType = CapType(0x11);
    /// `MLX5_CAP_VDPA_EMULATION` = 0x13.
    pub const VDPA_EMULATION: CapType = CapType(0x13);
    /// `MLX5_CAP_DEV_EVENT` = 0x14.
    pub const DEV_EVENT: CapType = CapType(0x14);
    /// `MLX5_CAP_IPSEC` = 0x15.
    pub const IPSEC: CapType = CapType(0x15);
    /// `MLX5_CAP_DEV_SHAMPO` = 0x1d.
    pub const DEV_SHAMPO: CapType = CapType(0x1d);
    /// `MLX5_CAP_MACSEC` = 0x1f.
    pub const MACSEC: CapType = CapType(0x1f);
    /// `MLX5_CAP_GENERAL_2` = 0x20.
    pub const GENERAL_2: CapType = CapType(0x20);
    /// `MLX5_CAP_PORT_SELECTION` = 0x25.
    pub const PORT_SELECTION: CapType = CapType(0x25);
    /// `MLX5_CAP_ADV_VIRTUALIZATION` = 0x26.
    pub const ADV_VIRTUALIZATION: CapType = CapType(0x26);
    /// Every constant above with its C name, and whether it comes from
    /// rdma-core v59's header rather than Linux 6.1's.
    pub const ALL: &'static [(&'static str, CapType, bool)] = &[
        ("MLX5_CAP_GENERAL", CapType::GENERAL, false),
        ("MLX5_CAP_ETHERNET_OFFLOADS", CapType::ETHERNET_OFFLOADS, false),
        ("MLX5_CAP_ODP", CapType::ODP, false),
        ("MLX5_CAP_ATOMIC", CapType::ATOMIC, false),
        ("MLX5_CAP_ROCE", CapType::ROCE, false),
        ("MLX5_CAP_IPOIB_OFFLOADS", CapType::IPOIB_OFFLOADS, false),
        ("MLX5_CAP_IPOIB_ENHANCED_OFFLOADS", CapType::IPOIB_ENHANCED_OFFLOADS, false),
        ("MLX5_CAP_FLOW_TABLE", CapType::FLOW_TABLE, false),
        ("MLX5_CAP_ESWITCH_FLOW_TABLE", CapType::ESWITCH_FLOW_TABLE, false),
        ("MLX5_CAP_ESWITCH", CapType::ESWITCH, false),
        ("MLX5_CAP_VECTOR_CALC", CapType::VECTOR_CALC, false),
        ("MLX5_CAP_QOS", CapType::QOS, false),
        ("MLX5_CAP_DEBUG", CapType::DEBUG, false),
        ("MLX5_CAP_DEV_MEM", CapType::DEV_MEM, false),
        ("MLX5_CAP_TLS", CapType::TLS, false),
        ("MLX5_CAP_VDPA_EMULATION", CapType::VDPA_EMULATION, false),
        ("MLX5_CAP_DEV_EVENT", CapType::DEV_EVENT, false),
        ("MLX5_CAP_IPSEC", CapType::IPSEC, false),
        ("MLX5_CAP_DEV_SHAMPO", CapType::DEV_SHAMPO, false),
        ("MLX5_CAP_MACSEC", CapType::MACSEC, false),
        ("MLX5_CAP_GENERAL_2", CapType::GENERAL_2, false),
        ("MLX5_CAP_PORT_SELECTION", CapType::PORT_SELECTION, false),
        ("MLX5_CAP_ADV_VIRTUALIZATION", CapType::ADV_VIRTUALIZATION, false),
    ];

    /// The `op_mod` of `QUERY_HCA_CAP` for this group: `(group << 1) | mode`.
    pub const fn op_mod(self, mode: CapMode) -> u16 {
        (self.0 << 1) | (mode.0 & 1)
    }
}

/// Which values `QUERY_HCA_CAP` returns: the maximum the device supports or
/// the current setting (`HCA_CAP_OPMOD_GET_MAX` / `_CUR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CapMode(pub u16);

impl CapMode {
    /// `HCA_CAP_OPMOD_GET_MAX` = 0x0.
    pub const MAX: CapMode = CapMode(0x0);
    /// `HCA_CAP_OPMOD_GET_CUR` = 0x1.
    pub const CUR: CapMode = CapMode(0x1);
    /// Every constant above with its C name, and whether it comes from
    /// rdma-core v59's header rather than Linux 6.1's.
    pub const ALL: &'static [(&'static str, CapMode, bool)] =
        &[("HCA_CAP_OPMOD_GET_MAX", CapMode::MAX, false), ("HCA_CAP_OPMOD_GET_CUR", CapMode::CUR, false)];
}

/// An event queue entry's type (`enum mlx5_event`): what a DEVX event
/// subscription names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventType(pub u8);

impl EventType {
    /// `MLX5_EVENT_TYPE_NOTIFY_ANY` = 0x0.
    pub const NOTIFY_ANY: EventType = EventType(0x0);
    /// `MLX5_EVENT_TYPE_COMP` = 0x0.
    pub const COMP: EventType = EventType(0x0);
    /// `MLX5_EVENT_TYPE_PATH_MIG` = 0x1.
    pub const PATH_MIG: EventType = EventType(0x1);
    /// `MLX5_EVENT_TYPE_COMM_EST` = 0x2.
    pub const COMM_EST: EventType = EventType(0x2);
    /// `MLX5_EVENT_TYPE_SQ_DRAINED` = 0x3.
    pub const SQ_DRAINED: EventType = EventType(0x3);
    /// `MLX5_EVENT_TYPE_SRQ_LAST_WQE` = 0x13.
    pub const SRQ_LAST_WQE: EventType = EventType(0x13);
    /// `MLX5_EVENT_TYPE_SRQ_RQ_LIMIT` = 0x14.
    pub const SRQ_RQ_LIMIT: EventType = EventType(0x14);
    /// `MLX5_EVENT_TYPE_CQ_ERROR` = 0x4.
    pub const CQ_ERROR: EventType = EventType(0x4);
    /// `MLX5_EVENT_TYPE_WQ_CATAS_ERROR` = 0x5.
    pub const WQ_CATAS_ERROR: EventType = EventType(0x5);
    /// `MLX5_EVENT_TYPE_PATH_MIG_FAILED` = 0x7.
    pub const PATH_MIG_FAILED: EventType = EventType(0x7);
    /// `MLX5_EVENT_TYPE_WQ_INVAL_REQ_ERROR` = 0x10.
    pub const WQ_INVAL_REQ_ERROR: EventType = EventType(0x10);
    /// `MLX5_EVENT_TYPE_WQ_ACCESS_ERROR` = 0x11.
    pub const WQ_ACCESS_ERROR: EventType = EventType(0x11);
    /// `MLX5_EVENT_TYPE_SRQ_CATAS_ERROR` = 0x12.
    pub const SRQ_CATAS_ERROR: EventType = EventType(0x12);
    /// `MLX5_EVENT_TYPE_OBJECT_CHANGE` = 0x27.
    pub const OBJECT_CHANGE: EventType = EventType(0x27);
    /// `MLX5_EVENT_TYPE_INTERNAL_ERROR` = 0x8.
    pub const INTERNAL_ERROR: EventType = EventType(0x8);
    /// `MLX5_EVENT_TYPE_PORT_CHANGE` = 0x9.
    pub const PORT_CHANGE: EventType = EventType(0x9);
    /// `MLX5_EVENT_TYPE_GPIO_EVENT` = 0x15.
    pub const GPIO_EVENT: EventType = EventType(0x15);
    /// `MLX5_EVENT_TYPE_PORT_MODULE_EVENT` = 0x16.
    pub const PORT_MODULE_EVENT: EventType = EventType(0x16);
    /// `MLX5_EVENT_TYPE_TEMP_WARN_EVENT` = 0x17.
    pub const TEMP_WARN_EVENT: EventType = EventType(0x17);
    /// `MLX5_EVENT_TYPE_XRQ_ERROR` = 0x18.
    pub const XRQ_ERROR: EventType = EventType(0x18);
    /// `MLX5_EVENT_TYPE_REMOTE_CONFIG` = 0x19.
    pub const REMOTE_CONFIG: EventType = EventType(0x19);
    /// `MLX5_EVENT_TYPE_GENERAL_EVENT` = 0x22.
    pub const GENERAL_EVENT: EventType = EventType(0x22);
    /// `MLX5_EVENT_TYPE_MONITOR_COUNTER` = 0x24.
    pub const MONITOR_COUNTER: EventType = EventType(0x24);
    /// `MLX5_EVENT_TYPE_PPS_EVENT` = 0x25.
    pub const PPS_EVENT: EventType = EventType(0x25);
    /// `MLX5_EVENT_TYPE_DB_BF_CONGESTION` = 0x1a.
    pub const DB_BF_CONGESTION: EventType = EventType(0x1a);
    /// `MLX5_EVENT_TYPE_STALL_EVENT` = 0x1b.
    pub const STALL_EVENT: EventType = EventType(0x1b);
    /// `MLX5_EVENT_TYPE_CMD` = 0xa.
    pub const CMD: EventType = EventType(0xa);
    /// `MLX5_EVENT_TYPE_PAGE_REQUEST` = 0xb.
    pub const PAGE_REQUEST: EventType = EventType(0xb);
    /// `MLX5_EVENT_TYPE_PAGE_FAULT` = 0xc.
    pub const PAGE_FAULT: EventType = EventType(0xc);
    /// `MLX5_EVENT_TYPE_NIC_VPORT_CHANGE` = 0xd.
    pub const NIC_VPORT_CHANGE: EventType = EventType(0xd);
    /// `MLX5_EVENT_TYPE_ESW_FUNCTIONS_CHANGED` = 0xe.
    pub const ESW_FUNCTIONS_CHANGED: EventType = EventType(0xe);
    /// `MLX5_EVENT_TYPE_VHCA_STATE_CHANGE` = 0xf.
    pub const VHCA_STATE_CHANGE: EventType = EventType(0xf);
    /// `MLX5_EVENT_TYPE_DCT_DRAINED` = 0x1c.
    pub const DCT_DRAINED: EventType = EventType(0x1c);
    /// `MLX5_EVENT_TYPE_DCT_KEY_VIOLATION` = 0x1d.
    pub const DCT_KEY_VIOLATION: EventType = EventType(0x1d);
    /// `MLX5_EVENT_TYPE_FPGA_ERROR` = 0x20.
    pub const FPGA_ERROR: EventType = EventType(0x20);
    /// `MLX5_EVENT_TYPE_FPGA_QP_ERROR` = 0x21.
    pub const FPGA_QP_ERROR: EventType = EventType(0x21);
    /// `MLX5_EVENT_TYPE_DEVICE_TRACER` = 0x26.
    pub const DEVICE_TRACER: EventType = EventType(0x26);
    /// Every constant above with its C name, and whether it comes from
    /// rdma-core v59's header rather than Linux 6.1's.
    pub const ALL: &'static [(&'static str, EventType, bool)] = &[
        ("MLX5_EVENT_TYPE_NOTIFY_ANY", EventType::NOTIFY_ANY, false),
        ("MLX5_EVENT_TYPE_COMP", EventType::COMP, false),
        ("MLX5_EVENT_TYPE_PATH_MIG", EventType::PATH_MIG, false),
        ("MLX5_EVENT_TYPE_COMM_EST", EventType::COMM_EST, false),
        ("MLX5_EVENT_TYPE_SQ_DRAINED", EventType::SQ_DRAINED, false),
        ("MLX5_EVENT_TYPE_SRQ_LAST_WQE", EventType::SRQ_LAST_WQE, false),
        ("MLX5_EVENT_TYPE_SRQ_RQ_LIMIT", EventType::SRQ_RQ_LIMIT, false),
        ("MLX5_EVENT_TYPE_CQ_ERROR", EventType::CQ_ERROR, false),
        ("MLX5_EVENT_TYPE_WQ_CATAS_ERROR", EventType::WQ_CATAS_ERROR, false),
        ("MLX5_EVENT_TYPE_PATH_MIG_FAILED", EventType::PATH_MIG_FAILED, false),
        ("MLX5_EVENT_TYPE_WQ_INVAL_REQ_ERROR", EventType::WQ_INVAL_REQ_ERROR, false),
        ("MLX5_EVENT_TYPE_WQ_ACCESS_ERROR", EventType::WQ_ACCESS_ERROR, false),
        ("MLX5_EVENT_TYPE_SRQ_CATAS_ERROR", EventType::SRQ_CATAS_ERROR, false),
        ("MLX5_EVENT_TYPE_OBJECT_CHANGE", EventType::OBJECT_CHANGE, false),
        ("MLX5_EVENT_TYPE_INTERNAL_ERROR", EventType::INTERNAL_ERROR, false),
        ("MLX5_EVENT_TYPE_PORT_CHANGE", EventType::PORT_CHANGE, false),
        ("MLX5_EVENT_TYPE_GPIO_EVENT", EventType::GPIO_EVENT, false),
        ("MLX5_EVENT_TYPE_PORT_MODULE_EVENT", EventType::PORT_MODULE_EVENT, false),
        ("MLX5_EVENT_TYPE_TEMP_WARN_EVENT", EventType::TEMP_WARN_EVENT, false),
        ("MLX5_EVENT_TYPE_XRQ_ERROR", EventType::XRQ_ERROR, false),
        ("MLX5_EVENT_TYPE_REMOTE_CONFIG", EventType::REMOTE_CONFIG, false),
        ("MLX5_EVENT_TYPE_GENERAL_EVENT", EventType::GENERAL_EVENT, false),
        ("MLX5_EVENT_TYPE_MONITOR_COUNTER", EventType::MONITOR_COUNTER, false),
        ("MLX5_EVENT_TYPE_PPS_EVENT", EventType::PPS_EVENT, false),
        ("MLX5_EVENT_TYPE_DB_BF_CONGESTION", EventType::DB_BF_CONGESTION, false),
        ("MLX5_EVENT_TYPE_STALL_EVENT", EventType::STALL_EVENT, false),
        ("MLX5_EVENT_TYPE_CMD", EventType::CMD, false),
        ("MLX5_EVENT_TYPE_PAGE_REQUEST", EventType::PAGE_REQUEST, false),
        ("MLX5_EVENT_TYPE_PAGE_FAULT", EventType::PAGE_FAULT, false),
        ("MLX5_EVENT_TYPE_NIC_VPORT_CHANGE", EventType::NIC_VPORT_CHANGE, false),
        ("MLX5_EVENT_TYPE_ESW_FUNCTIONS_CHANGED", EventType::ESW_FUNCTIONS_CHANGED, false),
        ("MLX5_EVENT_TYPE_VHCA_STATE_CHANGE", EventType::VHCA_STATE_CHANGE, false),
        ("MLX5_EVENT_TYPE_DCT_DRAINED", EventType::DCT_DRAINED, false),
        ("MLX5_EVENT_TYPE_DCT_KEY_VIOLATION", EventType::DCT_KEY_VIOLATION, false),
        ("MLX5_EVENT_TYPE_FPGA_ERROR", EventType::FPGA_ERROR, false),
        ("MLX5_EVENT_TYPE_FPGA_QP_ERROR", EventType::FPGA_QP_ERROR, false),
        ("MLX5_EVENT_TYPE_DEVICE_TRACER", EventType::DEVICE_TRACER, false),
    ];
}

/// A general object type (`MLX5_OBJ_TYPE_*`, `obj_type` of
/// [`GeneralObjInCmdHdr`](crate::mlx5dv::prm::GeneralObjInCmdHdr)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjType(pub u16);

impl ObjType {
    /// `MLX5_OBJ_TYPE_FLOW_METER` = 0xa (rdma-core v59; not in Linux 6.1's header).
    pub const FLOW_METER: ObjType = ObjType(0xa);
    /// `MLX5_OBJ_TYPE_DEK` = 0xc (rdma-core v59; not in Linux 6.1's header).
    pub const DEK: ObjType = ObjType(0xc);
    /// `MLX5_OBJ_TYPE_MATCH_DEFINER` = 0x18 (rdma-core v59; not in Linux 6.1's header).
    pub const MATCH_DEFINER: ObjType = ObjType(0x18);
    /// `MLX5_OBJ_TYPE_CRYPTO_LOGIN` = 0x1f (rdma-core v59; not in Linux 6.1's header).
    pub const CRYPTO_LOGIN: ObjType = ObjType(0x1f);
    /// `MLX5_OBJ_TYPE_FLOW_SAMPLER` = 0x20 (rdma-core v59; not in Linux 6.1's header).
    pub const FLOW_SAMPLER: ObjType = ObjType(0x20);
    /// `MLX5_OBJ_TYPE_HEADER_MODIFY_ARGUMENT` = 0x23 (rdma-core v59; not in Linux 6.1's header).
    pub const HEADER_MODIFY_ARGUMENT: ObjType = ObjType(0x23);
    /// `MLX5_OBJ_TYPE_ASO_FLOW_METER` = 0x24 (rdma-core v59; not in Linux 6.1's header).
    pub const ASO_FLOW_METER: ObjType = ObjType(0x24);
    /// `MLX5_OBJ_TYPE_ASO_FIRST_HIT` = 0x25 (rdma-core v59; not in Linux 6.1's header).
    pub const ASO_FIRST_HIT: ObjType = ObjType(0x25);
    /// `MLX5_OBJ_TYPE_SCHEDULING_ELEMENT` = 0x26 (rdma-core v59; not in Linux 6.1's header).
    pub const SCHEDULING_ELEMENT: ObjType = ObjType(0x26);
    /// `MLX5_OBJ_TYPE_ASO_CT` = 0x31 (rdma-core v59; not in Linux 6.1's header).
    pub const ASO_CT: ObjType = ObjType(0x31);
    /// `MLX5_OBJ_TYPE_AV_QP_MAPPING` = 0x3a (rdma-core v59; not in Linux 6.1's header).
    pub const AV_QP_MAPPING: ObjType = ObjType(0x3a);
    /// Every constant above with its C name, and whether it comes from
    /// rdma-core v59's header rather than Linux 6.1's.
    pub const ALL: &'static [(&'static str, ObjType, bool)] = &[
        ("MLX5_OBJ_TYPE_FLOW_METER", ObjType::FLOW_METER, true),
        ("MLX5_OBJ_TYPE_DEK", ObjType::DEK, true),
        ("MLX5_OBJ_TYPE_MATCH_DEFINER", ObjType::MATCH_DEFINER, true),
        ("MLX5_OBJ_TYPE_CRYPTO_LOGIN", ObjType::CRYPTO_LOGIN, true),
        ("MLX5_OBJ_TYPE_FLOW_SAMPLER", ObjType::FLOW_SAMPLER, true),
        ("MLX5_OBJ_TYPE_HEADER_MODIFY_ARGUMENT", ObjType::HEADER_MODIFY_ARGUMENT, true),
        ("MLX5_OBJ_TYPE_ASO_FLOW_METER", ObjType::ASO_FLOW_METER, true),
        ("MLX5_OBJ_TYPE_ASO_FIRST_HIT", ObjType::ASO_FIRST_HIT, true),
        ("MLX5_OBJ_TYPE_SCHEDULING_ELEMENT", ObjType::SCHEDULING_ELEMENT, true),
        ("MLX5_OBJ_TYPE_ASO_CT", ObjType::ASO_CT, true),
        ("MLX5_OBJ_TYPE_AV_QP_MAPPING", ObjType::AV_QP_MAPPING, true),
    ];
}

/// A bit of `opt_param_mask` in the QP modify commands (`enum mlx5_qpc_opt_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpcOptMask(pub u32);

impl QpcOptMask {
    /// `MLX5_QPC_OPT_MASK_INIT2INIT_DRAIN_SIGERR` = 0x800 (rdma-core v59; not in Linux 6.1's header).
    pub const INIT2INIT_DRAIN_SIGERR: QpcOptMask = QpcOptMask(0x800);
    /// `MLX5_QPC_OPT_MASK_RTS2RTS_LAG_TX_PORT_AFFINITY` = 0x8000 (rdma-core v59; not in Linux 6.1's header).
    pub const RTS2RTS_LAG_TX_PORT_AFFINITY: QpcOptMask = QpcOptMask(0x8000);
    /// Every constant above with its C name, and whether it comes from
    /// rdma-core v59's header rather than Linux 6.1's.
    pub const ALL: &'static [(&'static str, QpcOptMask, bool)] = &[
        ("MLX5_QPC_OPT_MASK_INIT2INIT_DRAIN_SIGERR", QpcOptMask::INIT2INIT_DRAIN_SIGERR, true),
        ("MLX5_QPC_OPT_MASK_RTS2RTS_LAG_TX_PORT_AFFINITY", QpcOptMask::RTS2RTS_LAG_TX_PORT_AFFINITY, true),
    ];
}

/// A bit of `opt_param_mask_95_32` in `rts2rts_qp_in` (`enum
/// mlx5_qpc_opt_mask_32`): the DCI stream reset sets `DCI_STREAM_CHANNEL_ID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpcOptMask32(pub u64);

impl QpcOptMask32 {
    /// `MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID` = 0x1 (rdma-core v59; not in Linux 6.1's header).
    pub const DCI_STREAM_CHANNEL_ID: QpcOptMask32 = QpcOptMask32(0x1);
    /// `MLX5_QPC_OPT_MASK_32_QOS_QUEUE_GROUP_ID` = 0x2 (rdma-core v59; not in Linux 6.1's header).
    pub const QOS_QUEUE_GROUP_ID: QpcOptMask32 = QpcOptMask32(0x2);
    /// `MLX5_QPC_OPT_MASK_32_UDP_SPORT` = 0x4 (rdma-core v59; not in Linux 6.1's header).
    pub const UDP_SPORT: QpcOptMask32 = QpcOptMask32(0x4);
    /// `MLX5_QPC_OPT_MASK_32_INIT2INIT_MMO` = 0x8 (rdma-core v59; not in Linux 6.1's header).
    pub const INIT2INIT_MMO: QpcOptMask32 = QpcOptMask32(0x8);
    /// Every constant above with its C name, and whether it comes from
    /// rdma-core v59's header rather than Linux 6.1's.
    pub const ALL: &'static [(&'static str, QpcOptMask32, bool)] = &[
        ("MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID", QpcOptMask32::DCI_STREAM_CHANNEL_ID, true),
        ("MLX5_QPC_OPT_MASK_32_QOS_QUEUE_GROUP_ID", QpcOptMask32::QOS_QUEUE_GROUP_ID, true),
        ("MLX5_QPC_OPT_MASK_32_UDP_SPORT", QpcOptMask32::UDP_SPORT, true),
        ("MLX5_QPC_OPT_MASK_32_INIT2INIT_MMO", QpcOptMask32::INIT2INIT_MMO, true),
    ];
}
