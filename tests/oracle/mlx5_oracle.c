/*
 * Oracle for tests/mlx5_oracle.rs: applies the installed mlx5dv.h helpers to
 * pseudo-random inputs and prints inputs and resulting bytes, one line each,
 * plus the layout of every struct the Rust side mirrors.
 * Build: cc -O2 -mssse3 mlx5_oracle.c (no library needed: the helpers are inline).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <infiniband/mlx5dv.h>

static uint64_t state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	uint64_t z = (state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void hex(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

#define SIZE(s) printf("S %s %zu\n", #s, sizeof(struct s))
#define OFF(s, f) printf("L %s %s %zu\n", #s, #f, offsetof(struct s, f))

static void layouts(void)
{
	SIZE(mlx5_wqe_ctrl_seg);
	OFF(mlx5_wqe_ctrl_seg, opmod_idx_opcode); OFF(mlx5_wqe_ctrl_seg, qpn_ds);
	OFF(mlx5_wqe_ctrl_seg, signature); OFF(mlx5_wqe_ctrl_seg, dci_stream_channel_id);
	OFF(mlx5_wqe_ctrl_seg, fm_ce_se); OFF(mlx5_wqe_ctrl_seg, imm);
	SIZE(mlx5_wqe_raddr_seg);
	OFF(mlx5_wqe_raddr_seg, raddr); OFF(mlx5_wqe_raddr_seg, rkey); OFF(mlx5_wqe_raddr_seg, reserved);
	SIZE(mlx5_wqe_data_seg);
	OFF(mlx5_wqe_data_seg, byte_count); OFF(mlx5_wqe_data_seg, lkey); OFF(mlx5_wqe_data_seg, addr);
	SIZE(mlx5_wqe_atomic_seg);
	OFF(mlx5_wqe_atomic_seg, swap_add); OFF(mlx5_wqe_atomic_seg, compare);
	SIZE(mlx5_wqe_inl_data_seg);
	OFF(mlx5_wqe_inl_data_seg, byte_count);
	SIZE(mlx5_wqe_av);
	OFF(mlx5_wqe_av, key); OFF(mlx5_wqe_av, dqp_dct); OFF(mlx5_wqe_av, stat_rate_sl);
	OFF(mlx5_wqe_av, fl_mlid); OFF(mlx5_wqe_av, rlid); OFF(mlx5_wqe_av, reserved0);
	OFF(mlx5_wqe_av, rmac); OFF(mlx5_wqe_av, tclass); OFF(mlx5_wqe_av, hop_limit);
	OFF(mlx5_wqe_av, grh_gid_fl); OFF(mlx5_wqe_av, rgid);
	SIZE(mlx5_wqe_eth_seg);
	OFF(mlx5_wqe_eth_seg, rsvd0); OFF(mlx5_wqe_eth_seg, cs_flags); OFF(mlx5_wqe_eth_seg, rsvd1);
	OFF(mlx5_wqe_eth_seg, mss); OFF(mlx5_wqe_eth_seg, rsvd2); OFF(mlx5_wqe_eth_seg, inline_hdr_sz);
	OFF(mlx5_wqe_eth_seg, inline_hdr_start); OFF(mlx5_wqe_eth_seg, inline_hdr);
	SIZE(mlx5_cqe64);
	OFF(mlx5_cqe64, srqn_uidx); OFF(mlx5_cqe64, imm_inval_pkey); OFF(mlx5_cqe64, app);
	OFF(mlx5_cqe64, byte_cnt); OFF(mlx5_cqe64, timestamp); OFF(mlx5_cqe64, sop_drop_qpn);
	OFF(mlx5_cqe64, wqe_counter); OFF(mlx5_cqe64, signature); OFF(mlx5_cqe64, op_own);
	SIZE(mlx5_err_cqe);
	OFF(mlx5_err_cqe, vendor_err_synd); OFF(mlx5_err_cqe, syndrome);
	OFF(mlx5_err_cqe, s_wqe_opcode_qpn); OFF(mlx5_err_cqe, wqe_counter); OFF(mlx5_err_cqe, op_own);
	SIZE(mlx5dv_clock_info);
	OFF(mlx5dv_clock_info, nsec); OFF(mlx5dv_clock_info, last_cycles); OFF(mlx5dv_clock_info, frac);
	OFF(mlx5dv_clock_info, mult); OFF(mlx5dv_clock_info, shift); OFF(mlx5dv_clock_info, mask);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;

	layouts();
	for (int i = 0; i < n; i++) {
		uint16_t pi = next(); uint8_t op = next(), opmod = next(), fm = next(), ds = next(), sig = next();
		uint32_t qpn = next() & 0xffffff, imm = next();
		struct mlx5_wqe_ctrl_seg c, x;
		memset(&c, 0, sizeof(c));
		memset(&x, 0, sizeof(x));
		mlx5dv_set_ctrl_seg(&c, pi, op, opmod, qpn, fm, ds, sig, imm);
		mlx5dv_x86_set_ctrl_seg(&x, pi, op, opmod, qpn, fm, ds, sig, imm);
		printf("C %u %u %u %u %u %u %u %u ", pi, op, opmod, qpn, fm, ds, sig, imm);
		hex(&c, sizeof(c)); printf(" "); hex(&x, sizeof(x)); printf("\n");
	}
	for (int i = 0; i < n; i++) {
		uint32_t len = next(), lkey = next(); uint64_t addr = next();
		struct mlx5_wqe_data_seg d, x;
		memset(&d, 0, sizeof(d));
		memset(&x, 0, sizeof(x));
		mlx5dv_set_data_seg(&d, len, lkey, addr);
		mlx5dv_x86_set_data_seg(&x, len, lkey, addr);
		printf("D %u %u %llu ", len, lkey, (unsigned long long)addr);
		hex(&d, sizeof(d)); printf(" "); hex(&x, sizeof(x)); printf("\n");
	}
	for (int i = 0; i < n; i++) {
		uint64_t key = next(); uint32_t dqp = next() & 0xffffff; uint8_t ext = next() & 1;
		uint8_t srsl = next(), flm = next(), tclass = next(), hop = next();
		uint16_t rlid = next(); uint32_t grh = next();
		uint8_t rmac[6], rgid[16];
		for (int j = 0; j < 6; j++) rmac[j] = next();
		for (int j = 0; j < 16; j++) rgid[j] = next();
		struct mlx5_wqe_datagram_seg g;
		memset(&g, 0, sizeof(g));
		mlx5dv_set_dgram_seg(&g, key, dqp, ext, srsl, flm, rlid, rmac, tclass, hop, grh, rgid);
		printf("G %llu %u %u %u %u %u ", (unsigned long long)key, dqp, ext, srsl, flm, rlid);
		hex(rmac, 6); printf(" %u %u %u ", tclass, hop, grh); hex(rgid, 16); printf(" ");
		hex(&g, sizeof(g)); printf("\n");
	}
	for (int i = 0; i < n; i++) {
		uint8_t cs = next(); uint16_t mss = next(); uint16_t sz = next() % 19;
		uint8_t hdr[18];
		for (int j = 0; j < 18; j++) hdr[j] = next();
		struct mlx5_wqe_eth_seg e;
		memset(&e, 0, sizeof(e));
		mlx5dv_set_eth_seg(&e, cs, mss, sz, hdr);
		printf("E %u %u %u ", cs, mss, sz); hex(hdr, sz ? sz : 0); printf("%s ", sz ? "" : "-");
		hex(&e, sizeof(e)); printf("\n");
	}
	for (int v = 0; v < 256; v++) {
		struct mlx5_cqe64 cqe;
		memset(&cqe, 0, sizeof(cqe));
		cqe.op_own = v;
		printf("Q %d %u %u %u %u\n", v, mlx5dv_get_cqe_owner(&cqe), mlx5dv_get_cqe_se(&cqe),
		       mlx5dv_get_cqe_format(&cqe), mlx5dv_get_cqe_opcode(&cqe));
	}
	for (int i = 0; i < n; i++) {
		struct mlx5dv_clock_info ci;
		int bits = 32 + next() % 33;
		ci.mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
		ci.nsec = next();
		ci.last_cycles = next() & ci.mask;
		ci.frac = next() & 0xffffffull;
		ci.mult = next() & 0xffffff;
		ci.shift = next() % 32;
		/* timestamps near last_cycles, both before and after */
		uint64_t ts = (ci.last_cycles + (next() % 2000000) - 1000000) & ci.mask;
		if (i % 7 == 0)
			ts = next() & ci.mask;
		printf("T %llu %llu %llu %u %u %llu %llu %llu\n", (unsigned long long)ci.nsec,
		       (unsigned long long)ci.last_cycles, (unsigned long long)ci.frac, ci.mult, ci.shift,
		       (unsigned long long)ci.mask, (unsigned long long)ts,
		       (unsigned long long)mlx5dv_ts_to_ns(&ci, ts));
	}
	return 0;
}
