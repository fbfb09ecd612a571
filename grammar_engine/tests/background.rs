//! Holding compilations: a compilation thread stops at its pause points while a decoder holds
//! compilations and goes on when every hold is released; other threads never stop; the time
//! held does not count against a deadline's wall-clock safety net.
//!
//! One test: the hold is process-wide, and tests of one binary run on parallel threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use grammar_engine::background::{held_time, hold, inherit, pause_point, pauses, release};
use grammar_engine::Deadline;

/// A thread that passes `points` pause points, counting them; `pausing` marks it as a
/// compilation thread.
fn walker(pausing: bool, points: usize, passed: Arc<AtomicUsize>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        inherit(pausing);
        assert_eq!(pauses(), pausing);
        for _ in 0..points {
            pause_point();
            passed.fetch_add(1, Ordering::SeqCst);
        }
    })
}

#[test]
fn a_held_compilation_waits_at_its_pause_points_and_nothing_else_does() {
    assert!(!pauses(), "a thread of its own does not pause");

    // a compilation thread stops at its first pause point while held, however many holders
    hold();
    hold();
    let compiling = Arc::new(AtomicUsize::new(0));
    let other = Arc::new(AtomicUsize::new(0));
    let c = walker(true, 3, compiling.clone());
    let o = walker(false, 3, other.clone());
    o.join().expect("the other thread");
    assert_eq!(other.load(Ordering::SeqCst), 3, "a thread that does not pause went through");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(compiling.load(Ordering::SeqCst), 0, "the compilation went on while held");
    release();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(compiling.load(Ordering::SeqCst), 0, "one release of two ended the hold");
    release();
    release(); // one too many: nothing
    c.join().expect("the compilation thread");
    assert_eq!(compiling.load(Ordering::SeqCst), 3);

    // a holder that never releases slows a compilation but cannot stop it
    hold();
    let started = Instant::now();
    let late = Arc::new(AtomicUsize::new(0));
    walker(true, 2, late.clone()).join().expect("the compilation thread");
    assert_eq!(late.load(Ordering::SeqCst), 2);
    assert!(started.elapsed() >= Duration::from_millis(1500), "it did not wait at each point");
    release();

    // the held time moves a deadline's wall-clock limit later
    let deadline = Deadline::new(Instant::now() + Duration::from_millis(200), None, 200);
    let before = held_time();
    hold();
    std::thread::sleep(Duration::from_millis(600));
    release();
    assert!(held_time() - before >= Duration::from_millis(600));
    assert!(!deadline.passed(), "the time held counted against the deadline");
    std::thread::sleep(Duration::from_millis(450));
    assert!(deadline.passed());
}
