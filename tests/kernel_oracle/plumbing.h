/* Kernel plumbing for the mlx5e CQE decompression oracle
 * (tests/mlx5_kernel_oracle.rs): the types, byte-order helpers and macros the
 * extracted kernel code uses, in user space. Nothing here decides how a CQE
 * is decompressed; that is the kernel's code, pasted after this file by the
 * test's extractor. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef uint16_t __be16;
typedef uint32_t __be32;
typedef uint64_t dma_addr_t;

#define PAGE_SHIFT 12
#define be16_to_cpu(x) __builtin_bswap16(x)
#define cpu_to_be16(x) __builtin_bswap16(x)
#define be32_to_cpu(x) __builtin_bswap32(x)
#define cpu_to_be32(x) __builtin_bswap32(x)
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define min_t(type, a, b) ((type)(a) < (type)(b) ? (type)(a) : (type)(b))
#define test_bit(nr, addr) ((int)((*(addr) >> (nr)) & 1UL))
#define dma_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define wmb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define rcu_access_pointer(p) (p)
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define ____cacheline_aligned_in_smp __attribute__((aligned(64)))
/* The driver's indirect-call hint: a plain call through the pointer. */
#define INDIRECT_CALL_3(f, f3, f2, f1, ...) f(__VA_ARGS__)
