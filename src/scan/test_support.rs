//! Setup shared by unit tests that read `/proc` (compiled for tests only).

use crate::ids::Pid;

/// Runs `f` with the id of a thread of this process that stays alive (parked
/// on a channel) until `f` returns: the pid counter hands out thread ids
/// too, and `/proc/TID` answers for them though it lists none, so a reader
/// by pid must be shown one. If `f` panics, the thread still ends (its
/// channel closes) but is not joined.
pub(crate) fn with_parked_thread<R>(f: impl FnOnce(Pid) -> R) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // `/proc/thread-self` reads `PID/task/TID`.
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        let tid: i32 = link.to_str().and_then(|l| l.rsplit('/').next()).and_then(|t| t.parse().ok()).unwrap();
        tx.send(tid).unwrap();
        let _ = done_rx.recv();
    });
    let tid = Pid::new(rx.recv().unwrap()).unwrap();
    let out = f(tid);
    done_tx.send(()).unwrap();
    t.join().unwrap();
    out
}
