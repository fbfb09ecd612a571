//! Compilation at a lower CPU priority than decoding.
//!
//! A server compiles a request's grammar while the other requests decode on the same cores.
//! With [`set_nice`] above 0, [`run`] executes the compilation on a thread pool whose threads
//! run at that nice value, so the kernel's scheduler gives the decoding threads the cores first
//! and a long compilation slows the running streams little. Everything the compilation starts
//! runs there too: rayon's parallel loops use the pool they are called from, and threads
//! spawned from a pool thread inherit its nice value.
//!
//! Linux sets nice values per thread. Elsewhere (`setpriority` would lower the whole process)
//! [`run`] calls the function in place and the priority is left unchanged.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

/// The nice value of the compile pool's threads; 0 runs compilations on the caller's thread.
static NICE: AtomicI32 = AtomicI32::new(0);

static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();

/// Sets the nice value (0 to 19) compilations run at from now on; 0 runs them on the caller's
/// thread at its own priority. The pool's threads take the value they are started with, so a
/// change after the first lowered compilation keeps the first value.
pub fn set_nice(nice: i32) {
    NICE.store(nice.clamp(0, 19), Ordering::Relaxed);
}

/// The nice value set by [`set_nice`].
pub fn nice() -> i32 {
    NICE.load(Ordering::Relaxed)
}

/// Runs `f` at the priority [`set_nice`] chose, blocking the caller until it returns.
pub fn run<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let nice = nice();
    if nice == 0 || !cfg!(target_os = "linux") {
        return f();
    }
    // `install` from one of the pool's own threads (a compilation inside a compilation) runs
    // `f` in place.
    match pool(nice) {
        Some(p) => p.install(f),
        None => f(),
    }
}

fn pool(nice: i32) -> Option<&'static rayon::ThreadPool> {
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("onyx-compile-{i}"))
            .start_handler(move |_| lower_this_thread(nice))
            .build()
            .ok()
    })
    .as_ref()
}

#[cfg(target_os = "linux")]
fn lower_this_thread(nice: i32) {
    // On Linux, PRIO_PROCESS with who = 0 is the calling thread alone. Raising a nice value
    // needs no privilege; a failure leaves the thread at its priority, which is still correct.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_this_thread(_nice: i32) {}
