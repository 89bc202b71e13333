/* The header the committed librdmacm bindings are generated from (cargo xtask bindings). */
#include <rdma/rdma_cma.h>
