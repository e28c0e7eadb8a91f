//! The events of one subscription between its cursor and what has been read: which may be sent now, and how far the
//! cursor may move.
//!
//! Several requests of one subscription may be in flight together (`Settings::requests_per_subscription`), so that
//! one slow answer does not hold up every event behind it; but never two events of one run, so each run's events
//! arrive in order (docs/design.md §10). An event whose run has one in flight waits, and so does every later event of
//! that run; later events of other runs may go ahead of it. The cursor moves only past events that were delivered
//! together with every event before them, so an instance that stops or dies, or a failure, sends again from the
//! first event not delivered (at least once; `webhook-id` is stable). Events of other runs delivered after that one
//! are sent again too, so a repeat may come after a later event of its run; the first arrivals of a run's events are
//! in order, and receivers deduplicate by `webhook-id`.

use std::collections::{HashSet, VecDeque};

use uuid::Uuid;

use crate::storage::outbox::{Position, StoredEvent};

/// Where one event read is.
#[derive(Debug)]
enum State {
    /// Read, not sent yet.
    Waiting(Box<StoredEvent>),
    /// A request is in flight.
    Sending,
    /// The receiver answered 2xx.
    Delivered,
    /// The request failed; nothing after this event is started any more.
    Failed,
}

#[derive(Debug)]
struct Entry {
    position: Position,
    /// `None` for an event of no run (an owner-scope rule's): such events keep their order among themselves.
    run: Option<Uuid>,
    state: State,
}

/// The events of one subscription read past its cursor, in the order of the feed.
#[derive(Debug)]
pub(super) struct Window {
    entries: VecDeque<Entry>,
    /// The last event read (the cursor while nothing is).
    read_up_to: Position,
    /// Most requests in flight at once.
    limit: usize,
    sending: usize,
}

impl Window {
    /// An empty window at `cursor`, sending at most `limit` requests at once (at least one).
    pub(super) fn new(cursor: Position, limit: usize) -> Self {
        Window {
            entries: VecDeque::new(),
            read_up_to: cursor,
            limit: limit.max(1),
            sending: 0,
        }
    }

    /// Where the next read begins: after the last event read.
    pub(super) fn read_up_to(&self) -> Position {
        self.read_up_to
    }

    /// Events read and not yet passed by the cursor.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is waiting or in flight.
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Requests in flight.
    pub(super) fn sending(&self) -> usize {
        self.sending
    }

    /// Adds events read after [`Window::read_up_to`], in their order.
    pub(super) fn push(&mut self, events: Vec<StoredEvent>) {
        for event in events {
            self.read_up_to = event.position;
            self.entries.push_back(Entry {
                position: event.position,
                run: event.run_id,
                state: State::Waiting(Box::new(event)),
            });
        }
    }

    /// Takes the next event that may be sent now, marking it in flight: none while `limit` requests are, after a
    /// failure, or when every waiting event's run has an earlier event in flight or waiting.
    pub(super) fn next_to_send(&mut self) -> Option<StoredEvent> {
        if self.sending >= self.limit {
            return None;
        }
        let mut busy = HashSet::new();
        let mut chosen = None;
        for (index, entry) in self.entries.iter().enumerate() {
            match entry.state {
                State::Failed => return None,
                State::Delivered => {}
                State::Sending => {
                    busy.insert(entry.run);
                }
                State::Waiting(_) => {
                    if busy.insert(entry.run) {
                        chosen = Some(index);
                        break;
                    }
                }
            }
        }
        let entry = &mut self.entries[chosen?];
        let State::Waiting(event) = std::mem::replace(&mut entry.state, State::Sending) else {
            unreachable!("only a waiting event is chosen");
        };
        self.sending += 1;
        Some(*event)
    }

    /// Records the answer to the request of the event at `position`.
    pub(super) fn finished(&mut self, position: Position, delivered: bool) {
        if let Some(entry) = self.entries.iter_mut().find(|e| e.position == position)
            && matches!(entry.state, State::Sending)
        {
            entry.state = if delivered {
                State::Delivered
            } else {
                State::Failed
            };
            self.sending -= 1;
        }
    }

    /// Passes the cursor over the events delivered together with every one before them: the last one's position
    /// and how many, or `None` when the first event is not delivered yet.
    pub(super) fn take_delivered(&mut self) -> Option<(Position, i64)> {
        let mut last = None;
        let mut count = 0;
        while let Some(entry) = self.entries.front()
            && matches!(entry.state, State::Delivered)
        {
            last = Some(entry.position);
            count += 1;
            self.entries.pop_front();
        }
        last.map(|position| (position, count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use serde_json::json;

    fn event(id: i64, run: u128) -> StoredEvent {
        StoredEvent {
            position: Position { xid: 1, id },
            public_id: Uuid::from_u128(id as u128),
            tenant: "t".into(),
            run_id: Some(Uuid::from_u128(run)),
            kind: "run.waiting".into(),
            data: json!({}),
            created_at: Utc::now(),
        }
    }

    fn ids(window: &mut Window) -> Vec<i64> {
        std::iter::from_fn(|| window.next_to_send())
            .map(|e| e.position.id)
            .collect()
    }

    #[test]
    fn events_of_different_runs_go_together_up_to_the_limit() {
        let mut window = Window::new(Position::START, 3);
        window.push((1..=5).map(|id| event(id, id as u128)).collect());
        assert_eq!(ids(&mut window), [1, 2, 3]);
        assert_eq!(window.sending(), 3);
        window.finished(Position { xid: 1, id: 2 }, true);
        assert_eq!(ids(&mut window), [4]);
    }

    #[test]
    fn a_run_s_next_event_waits_for_its_previous_one_and_later_runs_go_ahead() {
        let mut window = Window::new(Position::START, 8);
        // Run 1: events 1, 2 and 4; run 2: event 3.
        window.push(vec![event(1, 1), event(2, 1), event(3, 2), event(4, 1)]);
        assert_eq!(ids(&mut window), [1, 3]);
        window.finished(Position { xid: 1, id: 1 }, true);
        assert_eq!(
            ids(&mut window),
            [2],
            "event 4 waits for event 2 of its run"
        );
        window.finished(Position { xid: 1, id: 2 }, true);
        assert_eq!(ids(&mut window), [4]);
    }

    #[test]
    fn the_cursor_passes_only_events_delivered_with_every_one_before_them() {
        let mut window = Window::new(Position::START, 8);
        window.push((1..=3).map(|id| event(id, id as u128)).collect());
        assert_eq!(ids(&mut window), [1, 2, 3]);
        window.finished(Position { xid: 1, id: 2 }, true);
        window.finished(Position { xid: 1, id: 3 }, true);
        assert_eq!(window.take_delivered(), None, "event 1 is still in flight");
        window.finished(Position { xid: 1, id: 1 }, true);
        assert_eq!(
            window.take_delivered(),
            Some((Position { xid: 1, id: 3 }, 3))
        );
        assert!(window.is_empty());
        assert_eq!(window.read_up_to(), Position { xid: 1, id: 3 });
    }

    #[test]
    fn after_a_failure_nothing_more_starts_and_the_cursor_stops_before_it() {
        let mut window = Window::new(Position::START, 8);
        window.push((1..=2).map(|id| event(id, id as u128)).collect());
        assert_eq!(ids(&mut window), [1, 2]);
        window.push(vec![event(3, 3)]);
        window.finished(Position { xid: 1, id: 2 }, false);
        assert_eq!(
            ids(&mut window),
            Vec::<i64>::new(),
            "nothing starts after a failure"
        );
        window.finished(Position { xid: 1, id: 1 }, true);
        assert_eq!(
            window.take_delivered(),
            Some((Position { xid: 1, id: 1 }, 1))
        );
        assert_eq!(window.sending(), 0);
        assert_eq!(
            window.len(),
            2,
            "the failed event and the one read after it stay"
        );
    }

    #[test]
    fn a_limit_of_one_sends_every_event_one_after_another() {
        let mut window = Window::new(Position::START, 1);
        window.push((1..=3).map(|id| event(id, id as u128)).collect());
        assert_eq!(ids(&mut window), [1]);
        window.finished(Position { xid: 1, id: 1 }, true);
        assert_eq!(ids(&mut window), [2]);
    }
}
