//! Who may spin: the CPUs of this process, and the threads that keep them busy.
//!
//! A connection in steady use keeps one thread busy on each side, the client's and the NAA's.
//! The CPU demand ([`cpu_demand`]) counts the threads busy on this machine as far as this
//! process can know without asking other processes:
//! * one per open connection of this process ([`OpenConnection`]), plus one for the peer
//!   when it runs in another process of this machine (the same address, or a loopback one);
//!   a connection whose peer is in this very process (a local-mode NAA, a test) counts once
//!   per end, since both ends are registered here;
//! * one per other task of the parallel job on this node, as its launcher tells
//!   ([`launcher_local_tasks`]: MPI ranks and Slurm tasks each keep a core busy).
//!
//! While the demand fits the CPUs, every busy thread has a core of its own and spinning costs
//! no other thread its CPU time; beyond that, the adaptive policy sleeps at once (see
//! [`super::Waiter`]). Other busy work on the machine is not counted here: the waiting thread
//! notices it when it has to wait for a CPU (`contention`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Threads of this process spinning in a wait right now (see [`SpinSlot`]).
static SPINNING: AtomicUsize = AtomicUsize::new(0);
/// The CPU demand of the open connections (see [`cpu_demand`]).
static DEMAND: AtomicUsize = AtomicUsize::new(0);
/// The open connections of this process.
static OPEN: Mutex<Vec<Ends>> = Mutex::new(Vec::new());
/// Identity of the next [`OpenConnection`].
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The CPUs this process may run on (read once).
pub fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// How many threads of this process may spin at once: one per CPU it may run on.
pub(crate) fn spin_slots() -> usize {
    cpus()
}

/// Threads on this machine kept busy by open connections and by the other tasks of this
/// node's share of a parallel job: one per open connection of this process plus one per peer
/// of them running in another process of this machine ([`OpenConnection`]), plus
/// [`launcher_local_tasks`] less this one.
pub fn cpu_demand() -> usize {
    DEMAND.load(Ordering::Acquire) + launcher_local_tasks().saturating_sub(1)
}

/// The environment variables in which launchers give the number of tasks of a job on this
/// node, in the order they are read: Open MPI, MPICH and Intel MPI (Hydra), Slurm (`srun
/// --ntasks-per-node`).
pub const LAUNCHER_LOCAL_TASKS_VARS: [&str; 3] = [
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALNRANKS",
    "SLURM_NTASKS_PER_NODE",
];

/// How many tasks of this process's parallel job run on this node, this one included, as its
/// launcher says ([`LAUNCHER_LOCAL_TASKS_VARS`], read once); 1 outside a launcher.
pub fn launcher_local_tasks() -> usize {
    static TASKS: OnceLock<usize> = OnceLock::new();
    *TASKS.get_or_init(|| local_tasks_from(|name| std::env::var(name).ok()))
}

/// The first of [`LAUNCHER_LOCAL_TASKS_VARS`] that `var` gives as a positive number; 1 if none.
fn local_tasks_from(var: impl Fn(&str) -> Option<String>) -> usize {
    LAUNCHER_LOCAL_TASKS_VARS
        .iter()
        .filter_map(|name| var(name)?.trim().parse::<usize>().ok())
        .find(|&n| n > 0)
        .unwrap_or(1)
}

/// True while every thread the open connections keep busy has a CPU of its own.
pub fn cores_to_spare() -> bool {
    cpu_demand() <= cpus()
}

/// Leave to spin in a wait: at most [`spin_slots`] threads of the process spin at once. A
/// wait that finds every slot taken sleeps at once. The slot is given back when dropped.
/// [`super::WaitPolicy::Poll`] does not ask for one (it asked for a core per connection).
#[derive(Debug)]
pub(crate) struct SpinSlot(());

impl SpinSlot {
    /// A slot, if one is free.
    pub(crate) fn take() -> Option<Self> {
        Self::take_of(spin_slots())
    }

    /// A slot, if fewer than `slots` are taken.
    fn take_of(slots: usize) -> Option<Self> {
        SPINNING
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < slots).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(()))
    }
}

impl Drop for SpinSlot {
    fn drop(&mut self) {
        SPINNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One open connection's addresses, as the demand counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ends {
    id: u64,
    local: Option<SocketAddr>,
    peer: Option<SocketAddr>,
}

/// Registers an open connection while it lives, counting it in [`cpu_demand`]. Both
/// transports hold one per connection; a transport of your own that spins in its waits can
/// do the same.
#[derive(Debug)]
pub struct OpenConnection {
    id: u64,
}

impl OpenConnection {
    /// Registers a connection between `local` and `peer` (either unknown: `None`, counted as
    /// a peer on another machine).
    pub fn new(local: Option<SocketAddr>, peer: Option<SocketAddr>) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        update(|open| {
            open.push(Ends {
                id,
                local: local.map(canonical),
                peer: peer.map(canonical),
            });
        });
        Self { id }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        let id = self.id;
        update(|open| open.retain(|e| e.id != id));
    }
}

/// Changes the open connections and recomputes the demand.
fn update(change: impl FnOnce(&mut Vec<Ends>)) {
    let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
    change(&mut open);
    DEMAND.store(demand_of(&open), Ordering::Release);
}

/// One thread per connection, plus one for each peer in another process of this machine.
fn demand_of(open: &[Ends]) -> usize {
    open.iter()
        .map(|e| 1 + usize::from(peer_in_another_local_process(e, open)))
        .sum()
}

/// `e`'s peer runs on this machine (its address is `e`'s own or a loopback one), and not in
/// this process (no open connection here has the peer's address as its own).
fn peer_in_another_local_process(e: &Ends, open: &[Ends]) -> bool {
    let (Some(local), Some(peer)) = (e.local, e.peer) else {
        return false;
    };
    let on_this_machine = peer.ip() == local.ip() || peer.ip().is_loopback();
    on_this_machine && !open.iter().any(|o| o.local == Some(peer))
}

/// `addr` with an IPv4-mapped IPv6 address as plain IPv4.
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(id: u64, local: &str, peer: &str) -> Ends {
        Ends {
            id,
            local: Some(canonical(local.parse().unwrap())),
            peer: Some(canonical(peer.parse().unwrap())),
        }
    }

    #[test]
    fn spin_slots_are_bounded_and_given_back() {
        let base = SPINNING.load(Ordering::Acquire);
        let a = SpinSlot::take_of(base + 2).expect("first slot");
        let b = SpinSlot::take_of(base + 2).expect("second slot");
        assert!(SpinSlot::take_of(base + 2).is_none(), "only two slots");
        drop(a);
        let c = SpinSlot::take_of(base + 2).expect("a slot given back is free again");
        drop((b, c));
        assert_eq!(SPINNING.load(Ordering::Acquire), base);
        assert_eq!(spin_slots(), cpus());
        assert!(cpus() >= 1);
    }

    #[test]
    fn the_launcher_says_how_many_tasks_share_the_node() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(local_tasks_from(env(&[])), 1);
        assert_eq!(
            local_tasks_from(env(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "16")])),
            16
        );
        assert_eq!(
            local_tasks_from(env(&[("SLURM_NTASKS_PER_NODE", " 4 ")])),
            4
        );
        assert_eq!(
            local_tasks_from(env(&[
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "0"),
                ("MPI_LOCALNRANKS", "x"),
                ("SLURM_NTASKS_PER_NODE", "8"),
            ])),
            8,
            "unusable values are skipped"
        );
    }

    #[test]
    fn a_peer_elsewhere_counts_one_thread() {
        assert_eq!(demand_of(&[ends(0, "10.0.0.5:40000", "10.0.0.6:12345")]), 1);
        assert_eq!(demand_of(&[ends(0, "[fe80::1]:40000", "[fe80::2]:1")]), 1);
        let unknown = Ends {
            id: 0,
            local: None,
            peer: Some("127.0.0.1:1".parse().unwrap()),
        };
        assert_eq!(demand_of(&[unknown]), 1, "unknown addresses: elsewhere");
    }

    #[test]
    fn a_peer_in_another_process_here_counts_two_threads() {
        assert_eq!(demand_of(&[ends(0, "10.0.0.5:40000", "10.0.0.5:12345")]), 2);
        assert_eq!(
            demand_of(&[ends(0, "127.0.0.1:40000", "127.0.0.1:12345")]),
            2
        );
        assert_eq!(
            demand_of(&[ends(0, "10.0.0.5:40000", "127.0.0.1:12345")]),
            2
        );
        assert_eq!(demand_of(&[ends(0, "[::1]:40000", "[::1]:12345")]), 2);
        assert_eq!(
            demand_of(&[ends(0, "10.0.0.5:40000", "[::ffff:10.0.0.5]:12345")]),
            2,
            "IPv4-mapped"
        );
    }

    #[test]
    fn both_ends_in_this_process_count_one_thread_each() {
        let pair = [
            ends(0, "127.0.0.1:40000", "127.0.0.1:12345"),
            ends(1, "127.0.0.1:12345", "[::ffff:127.0.0.1]:40000"),
        ];
        assert_eq!(demand_of(&pair), 2);
        assert_eq!(demand_of(&pair[..1]), 2, "until the other end registers");
    }

    #[test]
    fn open_connections_count_until_dropped() {
        let registered = |id: u64| {
            let open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
            assert_eq!(DEMAND.load(Ordering::Acquire), demand_of(&open));
            open.iter().any(|e| e.id == id)
        };
        let conn = OpenConnection::new(
            Some("127.0.0.1:1".parse().unwrap()),
            Some("127.0.0.1:2".parse().unwrap()),
        );
        let id = conn.id;
        assert!(registered(id));
        assert!(cpu_demand() >= 2 + launcher_local_tasks() - 1);
        drop(conn);
        assert!(!registered(id));
    }
}
