//! Cluster control plane (not built yet).
//!
//! Will hold: a cluster description (TOML file or environment, rank and size
//! from SLURM, Open MPI or PMI launchers), a sans-IO rendezvous protocol over
//! TCP with a versioned, length-capped wire format, exchange of QP endpoints
//! and MR tokens, barrier and all-gather, each wait under a deadline.
