//! Memory keys (`mkc`, `CREATE_MKEY`), translation entries (`mtt`) and
//! user memory registration (`umem`, `CREATE_UMEM`).

use crate::mlx5dv::prm::field::layout;

layout! {
    /// Memory key context: access mode, access rights, `qpn`, `mkey_7_0`,
    /// start address, length, translation size, page size.
    Mkc = "mkc", bits 0x200, kernel_bits 0x200;
    fields {
        "free" free set_free 0x1 1 u32;
        "access_mode_4_2" access_mode_4_2 set_access_mode_4_2 0x3 3 u32;
        "relaxed_ordering_write" relaxed_ordering_write set_relaxed_ordering_write 0xd 1 u32;
        "small_fence_on_rdma_read_response" small_fence_on_rdma_read_response set_small_fence_on_rdma_read_response 0xf 1 u32;
        "umr_en" umr_en set_umr_en 0x10 1 u32;
        "a" a set_a 0x11 1 u32;
        "rw" rw set_rw 0x12 1 u32;
        "rr" rr set_rr 0x13 1 u32;
        "lw" lw set_lw 0x14 1 u32;
        "lr" lr set_lr 0x15 1 u32;
        "access_mode_1_0" access_mode_1_0 set_access_mode_1_0 0x16 2 u32;
        "ma_translation_mode" ma_translation_mode set_ma_translation_mode 0x1a 2 u32;
        "qpn" qpn set_qpn 0x20 24 u32;
        "mkey_7_0" mkey_7_0 set_mkey_7_0 0x38 8 u32;
        "length64" length64 set_length64 0x60 1 u32;
        "bsf_en" bsf_en set_bsf_en 0x61 1 u32;
        "sync_umr" sync_umr set_sync_umr 0x62 1 u32;
        "expected_sigerr_count" expected_sigerr_count set_expected_sigerr_count 0x65 1 u32;
        "en_rinval" en_rinval set_en_rinval 0x67 1 u32;
        "pd" pd set_pd 0x68 24 u32;
        "start_addr" start_addr set_start_addr 0x80 64 u64;
        "len" len set_len 0xc0 64 u64;
        "bsf_octword_size" bsf_octword_size set_bsf_octword_size 0x100 32 u32;
        "translations_octword_size" translations_octword_size set_translations_octword_size 0x1a0 32 u32;
        "relaxed_ordering_read" relaxed_ordering_read set_relaxed_ordering_read 0x1d9 1 u32;
        "log_page_size" log_page_size set_log_page_size 0x1db 5 u32;
        "crypto_en" crypto_en set_crypto_en 0x1e3 2 u32;
    }
    subs {
    }
    rdma_core ["crypto_en"]
}

layout! {
    /// `CREATE_MKEY` input: the memory key context and the translation size;
    /// the translation entries (MTT, KLM or KSM) follow the fixed structure.
    CreateMkeyIn = "create_mkey_in", bits 0x880, kernel_bits 0x880;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
        "pg_access" pg_access set_pg_access 0x60 1 u32;
        "mkey_umem_valid" mkey_umem_valid set_mkey_umem_valid 0x61 1 u32;
        "translations_octword_actual_size" translations_octword_actual_size set_translations_octword_actual_size 0x300 32 u32;
    }
    subs {
        "memory_key_mkey_entry" memory_key_mkey_entry memory_key_mkey_entry_mut Mkc 0x80;
    }
    rdma_core []
}

layout! {
    /// `CREATE_MKEY` output: the memory key index.
    CreateMkeyOut = "create_mkey_out", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "mkey_index" mkey_index set_mkey_index 0x48 24 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// A memory translation table entry (`ptag`).
    Mtt = "mtt", bits 0x40, kernel_bits 0x40;
    fields {
        "ptag_63_32" ptag_63_32 set_ptag_63_32 0x0 32 u32;
        "ptag_31_8" ptag_31_8 set_ptag_31_8 0x20 24 u32;
        "wr_en" wr_en set_wr_en 0x3e 1 u32;
        "rd_en" rd_en set_rd_en 0x3f 1 u32;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// A user memory registration (the `umem` object of `CREATE_UMEM`): page
    /// size, offset, number of MTT entries; the entries follow.
    Umem = "umem", bits 0x100, kernel_bits 0x100;
    fields {
        "ats" ats set_ats 0x80 1 u32;
        "log_page_size" log_page_size set_log_page_size 0x9b 5 u32;
        "page_offset" page_offset set_page_offset 0xa0 32 u32;
        "num_of_mtt" num_of_mtt set_num_of_mtt 0xc0 64 u64;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// `CREATE_UMEM` input.
    CreateUmemIn = "create_umem_in", bits 0x180, kernel_bits 0x180;
    fields {
        "opcode" opcode set_opcode 0x0 16 u32;
        "uid" uid set_uid 0x10 16 u32;
        "op_mod" op_mod set_op_mod 0x30 16 u32;
    }
    subs {
        "umem" umem umem_mut Umem 0x80;
    }
    rdma_core []
}

layout! {
    /// `CREATE_UMEM` output: the UMEM id.
    CreateUmemOut = "create_umem_out", bits 0x80, kernel_bits 0x80;
    fields {
        "status" status set_status 0x0 8 u32;
        "syndrome" syndrome set_syndrome 0x20 32 u32;
        "umem_id" umem_id set_umem_id 0x48 24 u32;
    }
    subs {
    }
    rdma_core []
}
