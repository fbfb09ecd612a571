//! The JSON Schema compiler's time limit counts the compiling threads' CPU time, so whether a
//! schema compiles, and how restricted, is the same on an idle machine and a busy one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use grammar_engine::{compile_json_schema_noting, thread_cpu_time, DfaConfig, GrammarError, JsonSchemaOptions};
use serde_json::json;

/// Threads that spin until dropped, many per core, so that any one thread gets a small share.
struct Load {
    stop: &'static AtomicBool,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(per_core: usize) -> Load {
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (0..per_core * cores)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.drain(..).for_each(|t| t.join().expect("spinner"));
    }
}

#[test]
fn a_busy_machine_compiles_the_same_grammar() {
    // The exact automaton has about 75,000 states: a few hundred milliseconds of CPU, well
    // within half of the limit (the exact attempt's share) on an idle machine.
    let schema = json!({"type": "string", "maxLength": 3000});
    let opts = JsonSchemaOptions { max_compile_ms: 4_000, ..JsonSchemaOptions::default() };
    let config = DfaConfig::default();

    let cpu = thread_cpu_time().expect("a thread CPU clock on this platform");
    let (idle, idle_restriction) = compile_json_schema_noting(&schema, &opts, &config).expect("compiles idle");
    let idle_cpu = thread_cpu_time().expect("clock") - cpu;
    assert!(idle_cpu < Duration::from_millis(1_500), "the exact attempt alone took {idle_cpu:?} of CPU");
    assert_eq!(idle_restriction, None);

    // Twenty spinners per core: the compiling thread gets a twentieth of a core or less, so
    // its wall-clock time is many times its CPU time, past the exact attempt's 2 s share.
    let load = Load::start(20);
    let started = Instant::now();
    let busy = compile_json_schema_noting(&schema, &opts, &config);
    let wall = started.elapsed();
    drop(load);
    let (busy, busy_restriction) = busy.expect("compiles under load");
    assert_eq!(busy_restriction, None, "restricted under load after {wall:?}");
    assert_eq!(busy.num_states(), idle.num_states());
}

#[test]
fn the_limit_is_a_typed_error_naming_cpu_time() {
    // One attempt only (no restriction to fall back on) and a limit far below its need.
    let schema = json!({"type": "string", "maxLength": 3000});
    let opts = JsonSchemaOptions { max_compile_ms: 5, allow_restriction: false, ..JsonSchemaOptions::default() };
    match compile_json_schema_noting(&schema, &opts, &DfaConfig::default()) {
        Err(GrammarError::TooLarge { what, limit, .. }) => {
            assert_eq!(what, "compile CPU time (ms)");
            assert_eq!(limit, 5);
        }
        other => panic!("expected a CPU time limit, got {:?}", other.map(|(d, r)| (d.num_states(), r))),
    }
}
