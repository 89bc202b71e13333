//! Device checks of the async layer (`wrap::aio`, feature `tokio`): its
//! device tests, and the four async examples run to their checked end.

use std::process::Command;

use crate::capture::executable;
use crate::device::Check;
use crate::{root, show, Result};

const EXAMPLES: [&str; 4] = ["aio_hello", "aio_echo", "aio_events", "aio_local_lookup"];

/// A server in the background and a client, on one TCP port; prints
/// `NAME client exit=N` and `NAME server exit=N`.
fn pair(name: &str, port: u16, server: &str, client: &str) -> String {
    format!(
        "timeout 120 {server} & S=$!; \
         for i in $(seq 100); do ss -ltn | grep -q ':{port} ' && break; sleep 0.1; done; \
         timeout 120 {client}; echo \"{name} client exit=$?\"; wait $S; echo \"{name} server exit=$?\"; "
    )
}

/// Builds the async examples and tests (with `--features tokio`) and
/// returns their device checks.
pub fn checks() -> Result<Vec<Check>> {
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "--features", "tokio"]).current_dir(root());
    for e in EXAMPLES {
        build.args(["--example", e]);
    }
    eprintln!("$ {}", show(&build));
    let built = build.status().is_ok_and(|s| s.success());
    let mut tests = Command::new(env!("CARGO"));
    tests
        .args(["test", "--no-run", "--features", "tokio", "--test", "aio", "--message-format=json"])
        .current_dir(root());
    eprintln!("$ {}", show(&tests));
    let out = tests.output()?;
    let bin = executable(&String::from_utf8_lossy(&out.stdout), "aio")
        .ok_or("building the async device tests (--features tokio --test aio) failed")?;
    let ex = |n: &str| format!("'{}'", root().join("target/debug/examples").join(n).display());
    let (hello, echo, events) = (ex("aio_hello"), ex("aio_echo"), ex("aio_events"));
    let mut v = vec![Check::libtest(
        "async layer device tests (1,000 in flight, dropped futures, vanished peer, through the RDMA CM)",
        format!("'{}' --ignored --test-threads=1", bin.display()),
    )];
    let hello_cmd = pair(
        "hello",
        18801,
        &format!("{hello} \"$RRDDMMA_TEST_DEVICE\" server 18801"),
        &format!("{hello} \"$RRDDMMA_TEST_DEVICE\" client 127.0.0.1:18801"),
    );
    v.push(Check::verdict("aio_hello: async-rdma's exchange, checked by the server", hello_cmd, move |d| {
        built
            && d.output.contains("hello client exit=0")
            && d.output.contains("hello server exit=0")
            && d.output.contains("data [1, 1, 1, 1, 0, 0, 0, 0]")
    }));
    // The same exchange through the RDMA CM, by the CM device's address.
    let cm_hello = format!(
        "timeout 120 {hello} - cm-server \"$RRDDMMA_CM_ADDR:18803\" & S=$!; \
         for i in $(seq 100); do rdma res show cm_id | grep -q \"$RRDDMMA_CM_ADDR:18803\" && break; sleep 0.1; done; \
         timeout 120 {hello} - cm-client \"$RRDDMMA_CM_ADDR:18803\"; echo \"hello client exit=$?\"; \
         wait $S; echo \"hello server exit=$?\"; "
    );
    v.push(Check::verdict("aio_hello through the RDMA CM (connect_cm, bind_cm)", cm_hello, move |d| {
        built
            && d.output.contains("hello client exit=0")
            && d.output.contains("hello server exit=0")
            && d.output.contains("data [1, 1, 1, 1, 0, 0, 0, 0]")
    }));
    let echo_cmd = pair(
        "echo",
        18802,
        &format!("{echo} \"$RRDDMMA_TEST_DEVICE\" server 18802 4"),
        &format!("{echo} \"$RRDDMMA_TEST_DEVICE\" client 127.0.0.1:18802 4 50"),
    );
    v.push(Check::verdict("aio_echo: one server, 4 clients at once, 200 echoes checked", echo_cmd, move |d| {
        built
            && d.output.contains("echo client exit=0")
            && d.output.contains("echo server exit=0")
            && d.output.contains("served 4 clients, 200 echoes")
    }));
    let events_cmd = format!(
        "ip link add rraio0 type veth peer name rraio1 && ip link set rraio0 up && ip link set rraio1 up \
         && rdma link add rxe_aio type rxe netdev rraio0; \
         timeout 60 {events} rxe_aio rraio0; echo \"events exit=$?\"; \
         rdma link delete rxe_aio; ip link del rraio0"
    );
    v.push(Check::verdict(
        "aio_events: awaits PORT_ERR and PORT_ACTIVE as the link goes down and up",
        events_cmd,
        move |d| built && d.output.contains("events exit=0") && d.output.contains("PORT_ERR, then PORT_ACTIVE"),
    ));
    let lookup = ex("aio_local_lookup");
    v.push(Check::verdict(
        "aio_local_lookup: 32 lookups in flight on one thread (LocalEndpoint::block_on), 128 values checked",
        format!("timeout 120 {lookup} \"$RRDDMMA_TEST_DEVICE\"; echo \"lookup exit=$?\""),
        move |d| {
            built
                && d.output.contains("lookup exit=0")
                && d.output.contains("128 lookups, 32 in flight on one thread, every value checked")
        },
    ));
    Ok(v)
}
