//! The listener's slots, shared fairly between peers ([`super::peer`]):
//! one peer holds at most [`PER_PEER`] connections, and when all are taken a
//! peer holding fewer than another gets a slot of the other's (its oldest
//! connection is cut). So a client whose peer holds nothing is served
//! unless every slot is held by a different peer, one each; a user
//! dribbling bytes into hundreds of connections holds four of them.

use std::collections::{HashMap, VecDeque};

use tokio::task::AbortHandle;

use super::peer::Peer;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 32;
/// Connections one peer may hold at once: a scraper and two probes need
/// three, from one peer in the worst case.
pub const PER_PEER: usize = 4;

/// A connection's ticket: its slot is given back when it is dropped.
pub type Id = u64;

/// The connections being served, per peer, oldest first.
pub struct Slots {
    total: usize,
    per_peer: usize,
    held: HashMap<Peer, VecDeque<(Id, AbortHandle)>>,
    count: usize,
    next: Id,
}

impl Slots {
    pub fn new(total: usize, per_peer: usize) -> Slots {
        Slots { total, per_peer, held: HashMap::new(), count: 0, next: 0 }
    }

    /// A ticket for the next connection.
    pub fn ticket(&mut self) -> Id {
        self.next += 1;
        self.next
    }

    /// Whether `peer`'s connection `id` (its task: `task`) is served. The
    /// tasks to cut are returned, to be aborted once this table is no
    /// longer borrowed: the connection's own when refused, or the
    /// connection it takes the slot of.
    pub fn admit(&mut self, peer: Peer, id: Id, task: AbortHandle) -> Option<AbortHandle> {
        let mine = self.held.get(&peer).map_or(0, VecDeque::len);
        if mine >= self.per_peer {
            return Some(task);
        }
        let mut cut = None;
        if self.count >= self.total {
            // The peer holding the most gives up its oldest, when that
            // leaves it no fewer than the newcomer will hold.
            let richest = self.held.iter().max_by_key(|(_, c)| c.len()).map(|(p, c)| (*p, c.len()));
            match richest {
                Some((victim, n)) if n > mine + 1 => {
                    cut = self.held.get_mut(&victim).and_then(VecDeque::pop_front).map(|(_, h)| h);
                    self.forget_empty(victim);
                    self.count -= 1;
                }
                _ => return Some(task),
            }
        }
        self.held.entry(peer).or_default().push_back((id, task));
        self.count += 1;
        cut
    }

    /// `peer`'s connection `id` ended (or was cut, or refused: then a no-op).
    pub fn release(&mut self, peer: Peer, id: Id) {
        let Some(c) = self.held.get_mut(&peer) else { return };
        if let Some(i) = c.iter().position(|(x, _)| *x == id) {
            c.remove(i);
            self.count -= 1;
            self.forget_empty(peer);
        }
    }

    fn forget_empty(&mut self, peer: Peer) {
        if self.held.get(&peer).is_some_and(VecDeque::is_empty) {
            self.held.remove(&peer);
        }
    }

    /// Connections held by `peer`.
    #[cfg(test)]
    fn of(&self, peer: Peer) -> usize {
        self.held.get(&peer).map_or(0, VecDeque::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An abort handle of a task that never runs (a runtime that is never driven).
    fn handle(rt: &tokio::runtime::Runtime) -> AbortHandle {
        rt.spawn(std::future::pending::<()>()).abort_handle()
    }

    #[test]
    fn a_peer_holds_its_share_and_a_newcomer_takes_a_slot_from_the_richest() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (a, b, c) = (Peer::Uid(1000), Peer::Uid(0), Peer::Addr([10, 0, 0, 1].into()));
        let mut s = Slots::new(6, 4);
        let mut ids = Vec::new();
        for _ in 0..4 {
            let id = s.ticket();
            assert!(s.admit(a, id, handle(&rt)).is_none());
            ids.push(id);
        }
        // Its fifth is refused: its own task comes back to be cut.
        let fifth = s.ticket();
        assert!(s.admit(a, fifth, handle(&rt)).is_some());
        assert_eq!(s.of(a), 4);
        for _ in 0..2 {
            let id = s.ticket();
            assert!(s.admit(c, id, handle(&rt)).is_none());
        }
        // Full (4 + 2): root's probe takes the oldest of the peer with the most.
        let probe = s.ticket();
        assert!(s.admit(b, probe, handle(&rt)).is_some(), "a slot of uid 1000's is cut");
        assert_eq!((s.of(a), s.of(b), s.of(c)), (3, 1, 2));
        // The cut one's end is a no-op; the rest give their slots back.
        s.release(a, ids[0]);
        assert_eq!(s.of(a), 3);
        s.release(a, ids[1]);
        assert_eq!((s.of(a), s.count), (2, 5));
        // Full again with 2 + 1 + 2 + a second of root's: nobody holds more than
        // one more than a newcomer of c's would, so c's third is refused.
        let id = s.ticket();
        assert!(s.admit(b, id, handle(&rt)).is_none());
        let id = s.ticket();
        assert!(s.admit(c, id, handle(&rt)).is_some());
        assert_eq!((s.of(a), s.of(b), s.of(c), s.count), (2, 2, 2, 6));
        // A peer with none takes one from one of the peers holding two.
        let d = Peer::Uid(1001);
        let id = s.ticket();
        assert!(s.admit(d, id, handle(&rt)).is_some());
        assert_eq!(s.of(d), 1);
        assert_eq!(s.count, 6);
    }
}
