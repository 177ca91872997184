//! How the host paces a run's launches: the groups one after another; in a group, every
//! variant's first launch in order, then each variant's next launch as soon as the host
//! sees its last one ended (it asks about the oldest few first, [`LOOKAHEAD`]: kernels of
//! one budget end about in the order they started). Every kernel starts as the host queues it on a stream that is idle, a few
//! microseconds after the one queued before it, so the launches of a group keep the stagger
//! of their first round and no launch waits for the slowest of a wave (docs/speed.md, "How
//! the kernels of a wave start").
//!
//! The pacing is written against [`Lanes`], so that its order is tested without a GPU; the
//! engine is its CUDA implementation.

use super::waves::Group;
use crate::error::GpuError;
use std::collections::VecDeque;

/// How many of the launches queued, oldest first, the host asks about in one sweep before
/// it starts again from the oldest: kernels end about in the order they started, so the
/// next to end is among the first few, and a sweep stays short.
const LOOKAHEAD: usize = 4;

/// What the pacing drives: a slot (a variant of the run) launches on a stream of its own.
pub(super) trait Lanes {
    /// Queues launch `launch` of slot `slot` (of group `group`) on its idle stream.
    fn launch(&mut self, group: usize, slot: usize, launch: usize) -> Result<(), GpuError>;
    /// Whether launch `launch` of `slot`, the last queued on its stream, has ended.
    fn ended(&mut self, group: usize, slot: usize, launch: usize) -> Result<bool, GpuError>;
    /// Queues the read-back of group `group`, every launch of which has ended.
    fn read_back(&mut self, group: usize) -> Result<(), GpuError>;
    /// Waits for `group`'s read-back and checks what each of its launches gave.
    fn check(&mut self, group: usize) -> Result<(), GpuError>;
    /// Poisons `group`'s buffer again (a group before it used it) and waits until it is.
    fn poison(&mut self, group: usize) -> Result<(), GpuError>;
}

/// Runs each group of `groups` (every launch of its range for each of its slots), the groups
/// one after another. The group before is checked once the next group's first launches are
/// queued: none of them ends for a launch's length, so the host has the time. A group that
/// reuses a buffer is poisoned first, once the group that used it is checked.
pub(super) fn pace(lanes: &mut impl Lanes, groups: &[Group]) -> Result<(), GpuError> {
    let mut unchecked = None;
    for (g, group) in groups.iter().enumerate() {
        if group.launches == 0 {
            continue;
        }
        if !group.fresh {
            lanes.poison(g)?;
        }
        for i in group.slots.clone() {
            lanes.launch(g, i, group.first)?;
        }
        crate::trace::mark(format!(
            "group {} of {}: first launches queued",
            g + 1,
            groups.len()
        ));
        if let Some(before) = unchecked.take() {
            lanes.check(before)?;
        }
        // Each slot's last queued launch, oldest first.
        let end = group.first + group.launches;
        let mut queued: VecDeque<(usize, usize)> =
            group.slots.clone().map(|i| (i, group.first)).collect();
        while !queued.is_empty() {
            let (mut k, mut running) = (0, 0);
            while k < queued.len() && running < LOOKAHEAD {
                let (i, l) = queued[k];
                if lanes.ended(g, i, l)? {
                    queued.remove(k);
                    if l + 1 < end {
                        lanes.launch(g, i, l + 1)?;
                        queued.push_back((i, l + 1));
                    }
                } else {
                    running += 1;
                    k += 1;
                }
            }
            std::hint::spin_loop();
        }
        lanes.read_back(g)?;
        unchecked = Some(g);
    }
    match unchecked {
        Some(last) => lanes.check(last),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    enum Step {
        Launch(usize, usize),
        Ended(usize, usize),
        ReadBack(usize),
        Check(usize),
        Poison(usize),
    }

    /// Groups of `sets`, each with launches `0..launches`, each in a buffer of its own.
    fn groups(sets: &[std::ops::Range<usize>], launches: usize) -> Vec<Group> {
        sets.iter()
            .map(|slots| Group {
                slots: slots.clone(),
                first: 0,
                launches,
                lo: 0,
                per_launch: 256,
                fresh: true,
            })
            .collect()
    }

    /// A GPU of a clock that ticks once per question: launch `l` of slot `i` ends `length(i,
    /// l)` ticks after it was queued. It records every step, and fails a launch or a
    /// question when told to.
    struct Fake {
        clock: u64,
        ends: std::collections::BTreeMap<usize, (usize, u64)>,
        length: fn(usize, usize) -> u64,
        steps: Vec<Step>,
        refuse: Option<(usize, usize)>,
    }

    impl Fake {
        fn new(length: fn(usize, usize) -> u64) -> Fake {
            Fake {
                clock: 0,
                ends: Default::default(),
                length,
                steps: Vec::new(),
                refuse: None,
            }
        }
    }

    impl Lanes for Fake {
        fn launch(&mut self, _: usize, slot: usize, launch: usize) -> Result<(), GpuError> {
            if self.refuse == Some((slot, launch)) {
                return Err(GpuError::cuda(format!("launching {slot}"), "refused"));
            }
            if let Some(&(l, end)) = self.ends.get(&slot) {
                assert!(
                    end <= self.clock,
                    "slot {slot}: launch {launch} queued while {l} ran"
                );
            }
            self.ends
                .insert(slot, (launch, self.clock + (self.length)(slot, launch)));
            self.steps.push(Step::Launch(slot, launch));
            Ok(())
        }

        fn ended(&mut self, _: usize, slot: usize, launch: usize) -> Result<bool, GpuError> {
            self.clock += 1;
            let (l, end) = self.ends[&slot];
            assert_eq!(
                l, launch,
                "asked about a launch that is not slot {slot}'s last"
            );
            let ended = end <= self.clock;
            if ended {
                self.steps.push(Step::Ended(slot, launch));
            }
            Ok(ended)
        }

        fn read_back(&mut self, group: usize) -> Result<(), GpuError> {
            self.steps.push(Step::ReadBack(group));
            Ok(())
        }

        fn check(&mut self, group: usize) -> Result<(), GpuError> {
            self.steps.push(Step::Check(group));
            Ok(())
        }

        fn poison(&mut self, group: usize) -> Result<(), GpuError> {
            self.steps.push(Step::Poison(group));
            Ok(())
        }
    }

    fn position(steps: &[Step], s: Step) -> usize {
        steps
            .iter()
            .position(|x| *x == s)
            .unwrap_or_else(|| panic!("{s:?} never happened: {steps:?}"))
    }

    /// The launches of slot `i`, in the order they were queued.
    fn launched(steps: &[Step], i: usize) -> Vec<usize> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Launch(j, l) if *j == i => Some(*l),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_slot_launches_again_once_its_last_launch_ended() {
        // Slot 1 is slow on its first launch: the others go on without it.
        let mut gpu = Fake::new(|i, l| if (i, l) == (1, 0) { 400 } else { 50 + i as u64 });
        pace(&mut gpu, &groups(&[0..4, 4..6], 3)).unwrap();
        let steps = gpu.steps;
        // Every launch once, each slot's in order, each after the one before it ended.
        for i in 0..6 {
            assert_eq!(launched(&steps, i), [0, 1, 2], "slot {i}");
            for l in 1..3 {
                assert!(
                    position(&steps, Step::Ended(i, l - 1)) < position(&steps, Step::Launch(i, l))
                );
            }
        }
        // A group's first launches in order, before anything else of it.
        assert_eq!(steps[..4], [0, 1, 2, 3].map(|i| Step::Launch(i, 0)));
        // The slow slot did not hold the others back: slot 0 launched again before slot 1
        // had ended.
        assert!(position(&steps, Step::Launch(0, 2)) < position(&steps, Step::Ended(1, 0)));
        // The second group starts once every launch of the first has ended and its
        // read-back is queued; the first is checked once the second's first launches are
        // queued, and the last after its own read-back.
        let read0 = position(&steps, Step::ReadBack(0));
        assert!((0..4).all(|i| position(&steps, Step::Ended(i, 2)) < read0));
        assert_eq!(
            steps[read0 + 1..read0 + 3],
            [Step::Launch(4, 0), Step::Launch(5, 0)]
        );
        assert_eq!(steps[read0 + 3], Step::Check(0));
        assert_eq!(
            steps[steps.len() - 2..],
            [Step::ReadBack(1), Step::Check(1)]
        );
        assert_eq!(
            steps.iter().filter(|s| matches!(s, Step::Check(_))).count(),
            2
        );
    }

    #[test]
    fn a_set_cut_into_groups_reuses_two_buffers_poisoned_once_the_group_before_is_checked() {
        let mut gpu = Fake::new(|_, _| 4);
        // One set of two slots, launches 0..5 in three groups (2, 2, 1), two buffers.
        let mut cut: Vec<Group> = [(0, 2), (2, 2), (4, 1)]
            .iter()
            .map(|&(first, launches)| Group {
                first,
                launches,
                ..groups(std::slice::from_ref(&(0..2)), 1)[0].clone()
            })
            .collect();
        cut[2].fresh = false;
        pace(&mut gpu, &cut).unwrap();
        let steps = gpu.steps;
        for i in 0..2 {
            assert_eq!(launched(&steps, i), [0, 1, 2, 3, 4], "slot {i}");
        }
        // The third group's buffer is the first's: poisoned after the first was checked
        // and after the second ended, before any launch of its own.
        let poison = position(&steps, Step::Poison(2));
        assert!(position(&steps, Step::Check(0)) < poison);
        assert!(position(&steps, Step::ReadBack(1)) < poison);
        assert!(poison < position(&steps, Step::Launch(0, 4)));
        assert_eq!(
            steps
                .iter()
                .filter(|s| matches!(s, Step::Poison(_)))
                .count(),
            1
        );
        assert_eq!(
            steps[steps.len() - 2..],
            [Step::ReadBack(2), Step::Check(2)]
        );
    }

    #[test]
    fn serial_groups_of_one_run_one_launch_at_a_time() {
        let mut gpu = Fake::new(|_, _| 3);
        pace(&mut gpu, &groups(&[0..1, 1..2], 2)).unwrap();
        assert_eq!(
            gpu.steps,
            [
                Step::Launch(0, 0),
                Step::Ended(0, 0),
                Step::Launch(0, 1),
                Step::Ended(0, 1),
                Step::ReadBack(0),
                Step::Launch(1, 0),
                Step::Check(0),
                Step::Ended(1, 0),
                Step::Launch(1, 1),
                Step::Ended(1, 1),
                Step::ReadBack(1),
                Step::Check(1),
            ]
        );
    }

    #[test]
    fn a_refused_launch_stops_the_run_and_nothing_is_checked_after_it() {
        let mut gpu = Fake::new(|_, _| 5);
        gpu.refuse = Some((2, 1));
        let e = pace(&mut gpu, &groups(&[0..3, 3..4], 2)).unwrap_err();
        assert!(e.to_string().contains("launching 2"), "{e}");
        assert!(!gpu
            .steps
            .iter()
            .any(|s| matches!(s, Step::ReadBack(_) | Step::Check(_) | Step::Launch(3, _))));
        // No launches, nothing to do.
        let mut idle = Fake::new(|_, _| 5);
        pace(&mut idle, &groups(&[0..2, 2..3], 0)).unwrap();
        assert!(idle.steps.is_empty());
    }
}
