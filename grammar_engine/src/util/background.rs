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
//!
//! A priority alone does not keep a compilation from slowing decoding on a machine of few
//! cores: whenever a decoding thread leaves a core for a moment, the compilation takes it and
//! evicts the caches and memory bandwidth the next matrix product needs. So the decoder can
//! also *hold* compilations ([`hold`] / [`release`], counted: several decoders may hold at
//! once): while held, a compilation thread stops at its next [`pause_point`] (between the
//! passes of each automaton construction, every few states of its loops, at each rule of a
//! pushdown grammar's analysis, and before each row of an index build) until the hold ends,
//! and the decoder gives compilations their share of time between its steps instead. A
//! pause lasts at most [`MAX_PAUSE`] at a time, so a holder that never releases slows
//! compilations but cannot stop them. Paused time does not count against a compilation's
//! wall-clock safety net ([`held_time`]). Only the pool's threads (and threads they start
//! through [`inherit`]) pause: a compilation on the caller's own thread, or a row built while
//! decoding, never waits for a hold.

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The longest one pause of a compilation thread lasts, whatever the holders do.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);

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
        Some(p) => {
            RUNNING.fetch_add(1, Ordering::Relaxed);
            let _running = Running;
            p.install(f)
        }
        None => f(),
    }
}

/// Compilations running on the pool now (what a decoder that holds them waits on).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many compilations are running on the pool (0 when compilations run in place).
pub fn running() -> usize {
    RUNNING.load(Ordering::Relaxed)
}

thread_local! {
    /// Whether this thread pauses while compilations are held.
    static PAUSES: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread pauses while compilations are held (a pool thread, or one it
/// started through [`inherit`]).
pub fn pauses() -> bool {
    PAUSES.with(Cell::get)
}

/// Makes the calling thread pause like the thread that started it (`parent`, from [`pauses`]
/// on that thread): for threads a compilation spawns itself.
pub fn inherit(parent: bool) {
    PAUSES.with(|p| p.set(parent));
}

struct Hold {
    holders: usize,
    /// When the current hold began (holders > 0).
    since: Option<Instant>,
}

static HOLD: Mutex<Hold> = Mutex::new(Hold { holders: 0, since: None });
static RELEASED: Condvar = Condvar::new();
/// Nanoseconds compilations were held, over the holds that ended.
static HELD_NS: AtomicU64 = AtomicU64::new(0);
/// `holders > 0`, readable without the lock (the pause point's fast path).
static HELD: AtomicUsize = AtomicUsize::new(0);

fn hold_state() -> std::sync::MutexGuard<'static, Hold> {
    HOLD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Holds compilations (see the module docs) until the matching [`release`].
pub fn hold() {
    let mut h = hold_state();
    h.holders += 1;
    if h.holders == 1 {
        h.since = Some(Instant::now());
    }
    HELD.store(h.holders, Ordering::Release);
}

/// Ends one [`hold`]; compilations go on once every holder released. A release without a
/// hold does nothing.
pub fn release() {
    let mut h = hold_state();
    if h.holders == 0 {
        return;
    }
    h.holders -= 1;
    if h.holders == 0 {
        if let Some(since) = h.since.take() {
            HELD_NS.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        RELEASED.notify_all();
    }
    HELD.store(h.holders, Ordering::Release);
}

/// The total time compilations have been held since the process started (for deadlines that
/// should not count it).
pub fn held_time() -> Duration {
    let h = hold_state();
    let ongoing = h.since.map_or(0, |s| s.elapsed().as_nanos() as u64);
    Duration::from_nanos(HELD_NS.load(Ordering::Relaxed) + ongoing)
}

/// Where a compilation may pause: returns at once unless compilations are held and this
/// thread pauses (see the module docs); then when the hold ends, or after [`MAX_PAUSE`].
#[inline]
pub fn pause_point() {
    if HELD.load(Ordering::Acquire) == 0 || !pauses() {
        return;
    }
    let h = hold_state();
    let _ = RELEASED.wait_timeout_while(h, MAX_PAUSE, |h| h.holders > 0);
}

fn pool(nice: i32) -> Option<&'static rayon::ThreadPool> {
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("onyx-compile-{i}"))
            .start_handler(move |_| {
                lower_this_thread(nice);
                inherit(true);
            })
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
