//! One I/O thread per CPU partition ([`PartitionThread`]): each pinned to its partition's
//! CPUs and running a tokio current-thread runtime of its own, on which the TCP LND runs the
//! connections whose peer hashes to that partition (socklnd's schedulers per CPT).
//!
//! Partition 0's thread is the node's I/O thread ([`run`](super::run)): besides its own
//! connections it fires the core's timer, polls the LNDs and serves the listening sockets.
//! The others ([`start`]) only run their runtime's tasks until the node closes. Every thread
//! still takes the one core lock for the work it does on the core (decision 0029).
//!
//! lustre: socklnd.c `ksocknal_base_startup()` / `ksocknal_start_schedulers()` (schedulers per
//! CPT, bound with `cfs_cpt_bind()`), socklnd.c `ksocknal_choose_scheduler_locked()`.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::{self, JoinHandle};

use crate::error::BuildError;

thread_local! {
    /// The partition whose I/O thread this is, if it is one.
    static CURRENT: Cell<Option<u32>> = const { Cell::new(None) };
    /// The node whose I/O thread this is (`Shared::id`), with [`CURRENT`].
    static CURRENT_NODE: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The partition whose I/O thread is running this code, `None` off the I/O threads.
pub(crate) fn current() -> Option<u32> {
    CURRENT.with(Cell::get)
}

/// [`current`] when this thread is an I/O thread of node `node_id` (a process may run
/// several nodes, each with its own threads).
pub(crate) fn current_on(node_id: u64) -> Option<u32> {
    CURRENT_NODE.with(Cell::get).filter(|&id| id == node_id).and(current())
}

/// Marks this thread as partition `cpt`'s I/O thread of node `node_id`.
pub(crate) fn enter(node_id: u64, cpt: u32) {
    CURRENT.with(|current| current.set(Some(cpt)));
    CURRENT_NODE.with(|node| node.set(Some(node_id)));
}

/// Set once a pinning failure was logged: the warning is the same for every thread.
static PIN_WARNED: AtomicBool = AtomicBool::new(false);

/// Pins this thread to the CPUs of partition `cpt` that the process may run on (a `taskset`
/// or cgroup mask is respected: pinning narrows it, never widens it). Nothing to pin to, or a
/// refusal, is logged once per process and the thread runs unpinned: partitions are about
/// where work runs best, not whether it runs. Returns whether the thread was pinned.
pub(crate) fn pin(cpt: u32, cpus: &[usize]) -> bool {
    if cpus.is_empty() {
        return false;
    }
    let allowed = rustix::thread::sched_getaffinity(None).ok();
    let mut set = rustix::thread::CpuSet::new();
    let mut any = false;
    for &cpu in cpus.iter().filter(|&&cpu| cpu < rustix::thread::CpuSet::MAX_CPU) {
        if allowed.as_ref().is_none_or(|allowed| allowed.is_set(cpu)) {
            set.set(cpu);
            any = true;
        }
    }
    let outcome = if any {
        rustix::thread::sched_setaffinity(None, &set).map_err(std::io::Error::from)
    } else {
        Err(std::io::Error::other("none of its CPUs is in the process's affinity mask"))
    };
    match outcome {
        Ok(()) => true,
        Err(error) => {
            if !PIN_WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!(cpt, ?cpus, %error, "I/O thread left unpinned");
            }
            false
        }
    }
}

/// The I/O thread of a partition other than 0, and how to stop it.
pub(crate) struct PartitionThread {
    stop: Arc<tokio::sync::Notify>,
    thread: Option<JoinHandle<()>>,
}

impl PartitionThread {
    /// Stops the thread and joins it: its runtime, with the connection tasks on it, is dropped
    /// first. Idempotent.
    pub(crate) fn stop(&mut self) {
        // A permit is kept if the thread is not waiting yet.
        self.stop.notify_one();
        if let Some(thread) = self.thread.take() {
            // Stopped from its own thread (the node's last handle dropped by a task or an
            // event handler running there): it leaves when this task returns; joining itself
            // would deadlock.
            if thread.thread().id() == thread::current().id() {
                return;
            }
            if thread.join().is_err() {
                tracing::error!("a partition's I/O thread panicked");
            }
        }
    }
}

impl Drop for PartitionThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts partition `cpt`'s I/O thread (`cpt` > 0), pinned to `cpus` when given, and returns
/// its runtime once it runs.
pub(crate) fn start(
    node_id: u64,
    cpt: u32,
    cpus: Vec<usize>,
) -> Result<(tokio::runtime::Handle, PartitionThread), BuildError> {
    let stop = Arc::new(tokio::sync::Notify::new());
    let (ready, started) = mpsc::sync_channel(1);
    let thread_stop = Arc::clone(&stop);
    let thread = thread::Builder::new()
        .name(format!("ulnet-io-{node_id}.{cpt}"))
        .spawn(move || {
            enter(node_id, cpt);
            pin(cpt, &cpus);
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = ready.send(Err(BuildError::Runtime(error)));
                    return;
                }
            };
            let _ = ready.send(Ok(runtime.handle().clone()));
            // The runtime runs its tasks (connections, dials) while this waits.
            runtime.block_on(thread_stop.notified());
        })
        .map_err(BuildError::Thread)?;
    let mut partition = PartitionThread { stop, thread: Some(thread) };
    match started.recv() {
        Ok(Ok(handle)) => Ok((handle, partition)),
        Ok(Err(error)) => {
            partition.stop();
            Err(error)
        }
        Err(_) => {
            partition.stop();
            Err(BuildError::ThreadExited)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_thread_runs_tasks_until_stopped() {
        let (handle, mut thread) = start(0, 1, Vec::new()).unwrap();
        let (sender, receiver) = mpsc::sync_channel(1);
        drop(handle.spawn(async move {
            let _ = sender.send((current(), thread::current().name().map(str::to_owned)));
        }));
        let (cpt, name) = receiver.recv().unwrap();
        assert_eq!(cpt, Some(1));
        assert_eq!(name.as_deref(), Some("ulnet-io-0.1"));
        thread.stop();
        thread.stop();
        // A stopped partition's runtime takes no more work.
        let (sender, receiver) = mpsc::sync_channel::<()>(1);
        drop(handle.spawn(async move { drop(sender) }));
        assert!(receiver.recv().is_err());
    }

    #[test]
    fn pinning_stays_inside_the_process_mask() {
        let allowed = rustix::thread::sched_getaffinity(None).unwrap();
        let cpu = (0..rustix::thread::CpuSet::MAX_CPU).find(|&cpu| allowed.is_set(cpu)).unwrap();
        let pinned = thread::spawn(move || {
            let pinned = pin(0, &[cpu]);
            (pinned, rustix::thread::sched_getaffinity(None).unwrap().count())
        })
        .join()
        .unwrap();
        assert_eq!(pinned, (true, 1));
        // No CPU the process may use: left as it was, not an error.
        let outside =
            thread::spawn(|| pin(0, &[rustix::thread::CpuSet::MAX_CPU + 1])).join().unwrap();
        assert!(!outside);
    }
}
