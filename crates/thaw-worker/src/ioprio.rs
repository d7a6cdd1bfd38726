//! The idle I/O class for migration copies from a real disk (ioprio_set(2)).
//!
//! The device model gives a migration's DISK reads the idle class itself
//! (`device.rs`); on a real disk the kernel does it: a thread in the idle class
//! is served only when no other I/O is pending on the disk, so migrations take
//! only what the jobs' reads leave (DYRS's "residual bandwidth"). The BFQ
//! scheduler honours the class; the `none` and `mq-deadline` schedulers ignore
//! it, and then the copy runs as it would without.

/// `IOPRIO_CLASS_IDLE` (linux/ioprio.h).
pub const CLASS_IDLE: i32 = 3;
const CLASS_SHIFT: i32 = 13;
const WHO_PROCESS: libc::c_int = 1;

/// The calling thread's I/O priority class (0: none set, derived from its nice
/// value), or `None` where the call is not available.
pub fn current_class() -> Option<i32> {
    get().map(|v| v >> CLASS_SHIFT)
}

fn get() -> Option<libc::c_int> {
    // SAFETY: ioprio_get takes two integers; 0 names the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_get, WHO_PROCESS, 0) };
    (r >= 0).then_some(r as libc::c_int)
}

fn set(value: libc::c_int) -> bool {
    // SAFETY: ioprio_set takes three integers; 0 names the calling thread.
    unsafe { libc::syscall(libc::SYS_ioprio_set, WHO_PROCESS, 0, value) == 0 }
}

/// While alive, the calling thread's I/O is in the idle class; dropping it
/// gives the thread back its previous priority (copies run on tokio's shared
/// blocking threads, which must not stay idle-class for other work).
pub struct IdleIo {
    previous: Option<libc::c_int>,
}

impl IdleIo {
    /// Enters the idle class; if the kernel refuses, I/O goes on as before.
    pub fn enter() -> IdleIo {
        let previous = get().filter(|_| set(CLASS_IDLE << CLASS_SHIFT));
        if previous.is_none() {
            tracing::debug!("ioprio_set(IDLE) refused: this copy reads at normal priority");
        }
        IdleIo { previous }
    }
}

impl Drop for IdleIo {
    fn drop(&mut self) {
        if let Some(p) = self.previous {
            set(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_class_holds_for_the_guard_s_life_and_only_on_its_thread() {
        // A thread that exists before the guard (new threads inherit the class).
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (tell, told) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            while asked.recv().is_ok() {
                tell.send(current_class()).unwrap();
            }
        });
        std::thread::spawn(move || {
            let before = current_class().expect("ioprio_get works on Linux");
            assert_ne!(before, CLASS_IDLE);
            {
                let _idle = IdleIo::enter();
                assert_eq!(current_class(), Some(CLASS_IDLE));
                ask.send(()).unwrap();
                assert_eq!(told.recv().unwrap(), Some(before), "another thread is untouched");
            }
            assert_eq!(current_class(), Some(before), "restored when the guard drops");
        })
        .join()
        .unwrap();
        other.join().unwrap();
    }
}
