/* The fixed half of the PRM oracle's C program (the generated half, before
 * this, defines F[], L[], NF, NL and consts()). For each structure, in the
 * order of L[]: CASES random values set by the header's MLX5_SET into a
 * zeroed buffer (FNV-1a of the buffer) and read back by MLX5_GET from a
 * random buffer; the same procedure runs in Rust on rrddmma's setters and
 * getters. Random numbers are splitmix64 from the seed given by the test. */

static u64 splitmix(u64 *s)
{
	u64 z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static u64 fnv(const u8 *b, size_t n)
{
	u64 h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s RESULTS SEED\n", argv[0]);
		return 2;
	}
	FILE *out = fopen(argv[1], "wb");
	if (!out)
		return 3;
	u64 seed = strtoull(argv[2], NULL, 0);
	for (size_t i = 0; i < NL; i++)
		printf("S %s %u\n", L[i].name, L[i].c_bytes);
	for (size_t i = 0; i < NF; i++)
		printf("F %s %s %u %u\n", L[F[i].lay].name, F[i].path, F[i].c_off, F[i].c_bits);
	subs();
	consts();
	for (size_t i = 0; i < NL; i++) {
		const struct lay *l = &L[i];
		u8 *bs = calloc(1, l->bytes), *bg = malloc(l->bytes);
		u64 st = seed ^ ((u64)(i + 1) * 0x9e3779b97f4a7c15ULL);
		for (u32 k = 0; k + 8 <= l->bytes; k += 8) {
			u64 r = splitmix(&st);
			memcpy(bg + k, &r, 8);
		}
		for (u64 c = 0; c < l->cases; c++) {
			const struct fld *f = &F[l->first + c % l->n];
			u64 max = f->bits == 64 ? ~0ULL : (1ULL << f->bits) - 1;
			u64 r = splitmix(&st), round = c / l->n;
			u64 v = round == 0 ? max : round == 1 ? 1 : (r & max);
			memset(bs, 0, l->bytes);
			f->set(bs, v);
			u64 res[2];
			res[0] = fnv(bs, l->bytes);
			for (u32 d = f->off / 32; d < f->off / 32 + (f->bits == 64 ? 2 : 1); d++) {
				u32 w = (u32)splitmix(&st);
				if (d * 4 + 4 <= l->bytes)
					memcpy(bg + d * 4, &w, 4);
			}
			res[1] = f->get(bg);
			fwrite(res, sizeof res, 1, out);
		}
		free(bs);
		free(bg);
	}
	return fclose(out) ? 4 : 0;
}
