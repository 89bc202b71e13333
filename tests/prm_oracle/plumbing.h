/* Plumbing written for the PRM layout oracle (tests/mlx5_prm_oracle.rs):
 * the kernel types and byte-order helpers the MLX5_SET / MLX5_GET macros of
 * include/linux/mlx5/device.h and the headers use, on a little-endian host. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the PRM oracle's byte-order plumbing assumes a little-endian host"
#endif

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef uint32_t __be32;
typedef uint64_t __be64;
typedef uint16_t __be16;

#define cpu_to_be32(x) __builtin_bswap32((u32)(x))
#define be32_to_cpu(x) __builtin_bswap32((u32)(x))
#define cpu_to_be64(x) __builtin_bswap64((u64)(x))
#define be64_to_cpu(x) __builtin_bswap64((u64)(x))
#define BUILD_BUG_ON(c) ((void)sizeof(char[1 - 2 * !!(c)]))
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
