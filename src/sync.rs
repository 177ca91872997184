//! Locking a mutex whatever an earlier holder did: a thread that panicked while holding
//! one leaves its data as it was, and every user of these mutexes (caches, records,
//! counters) reads such data as good, so a panic in one case never stops the others.

use std::sync::{Mutex, MutexGuard};

/// `m.lock()`, taking the data of a mutex poisoned by a panic as it is.
pub fn lock_ignoring_poison<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutex_poisoned_by_a_panic_still_gives_its_data() {
        let m = Mutex::new(7);
        let _ = std::thread::scope(|s| {
            s.spawn(|| {
                let mut g = m.lock().unwrap();
                *g = 8;
                panic!("poisoning");
            })
            .join()
        });
        assert!(m.is_poisoned());
        assert_eq!(*lock_ignoring_poison(&m), 8);
    }
}
