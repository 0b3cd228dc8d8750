//! The [`GuardStore`] contract: create-if-absent, compare-and-set on revisions, read,
//! delete, list by prefix.
//!
//! Every case runs in two key spaces, [`SPACES`]: the guard's call records (`guard.…`)
//! and another (`approval.…`, as approvals and budgets use). The JetStream store keeps
//! the first kind on the facts stream and the second in a KV bucket; the contract is
//! the same for both.
//!
//! Revisions are compared within one key space: the JetStream store numbers its two
//! places apart, so a revision of one says nothing about one of the other.

use aaa_guard::{GuardStore, StoreError};

/// The key spaces every case runs in.
pub const SPACES: [&str; 2] = ["guard", "approval"];

/// `<space>.t.r.<name>`.
fn key(space: &str, name: &str) -> String {
    format!("{space}.t.r.{name}")
}

/// `create` makes a record that is absent, and only then; `get` reads it back as
/// written, with the revision `create` gave.
pub async fn create_makes_a_record_only_when_absent(store: &dyn GuardStore) {
    for space in SPACES {
        let k = key(space, "c1");
        assert_eq!(store.get(&k).await.unwrap(), None);
        let revision = store.create(&k, b"1".to_vec()).await.unwrap();
        let again = store.create(&k, b"x".to_vec()).await;
        assert!(
            matches!(&again, Err(StoreError::Exists { key }) if *key == k),
            "{again:?}"
        );
        let entry = store.get(&k).await.unwrap().expect("the record");
        assert_eq!((entry.value, entry.revision), (b"1".to_vec(), revision));
    }
}

/// Values come back byte for byte: empty, binary, large.
pub async fn values_come_back_as_written(store: &dyn GuardStore) {
    let binary: Vec<u8> = (0..=255).collect();
    let large: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
    for space in SPACES {
        for (name, value) in [
            ("empty", Vec::new()),
            ("binary", binary.clone()),
            ("large", large.clone()),
        ] {
            let k = key(space, name);
            let revision = store.create(&k, value.clone()).await.unwrap();
            let entry = store.get(&k).await.unwrap().expect("the record");
            assert_eq!(
                (entry.value, entry.revision),
                (value.clone(), revision),
                "{k}"
            );
        }
    }
}

/// `update` replaces a record still at the expected revision, with a higher revision;
/// a stale revision, or a record that is gone, is a conflict and changes nothing.
pub async fn update_compares_and_sets_on_the_revision(store: &dyn GuardStore) {
    for space in SPACES {
        let k = key(space, "c1");
        let first = store.create(&k, b"1".to_vec()).await.unwrap();
        let second = store.update(&k, b"2".to_vec(), first).await.unwrap();
        assert!(second > first, "{second} after {first}");
        let third = store.update(&k, b"3".to_vec(), second).await.unwrap();
        assert!(third > second, "{third} after {second}");

        let stale = store.update(&k, b"stale".to_vec(), second).await;
        assert!(
            matches!(&stale, Err(StoreError::Conflict { key, expected, .. })
                if *key == k && *expected == second),
            "{stale:?}"
        );
        let entry = store.get(&k).await.unwrap().expect("the record");
        assert_eq!((entry.value, entry.revision), (b"3".to_vec(), third));

        let missing = key(space, "missing");
        let gone = store.update(&missing, b"x".to_vec(), third).await;
        assert!(
            matches!(&gone, Err(StoreError::Conflict { key, found: None, .. }) if *key == missing),
            "{gone:?}"
        );
        assert_eq!(
            store.get(&missing).await.unwrap(),
            None,
            "nothing was written"
        );
    }
}

/// Of two writers that read the same revision, one wins and the other is told.
pub async fn of_two_writers_one_wins(store: &dyn GuardStore) {
    for space in SPACES {
        let k = key(space, "race");
        let read = store.create(&k, b"0".to_vec()).await.unwrap();
        let (a, b) = futures::join!(
            store.update(&k, b"a".to_vec(), read),
            store.update(&k, b"b".to_vec(), read)
        );
        let (won, lost, value) = match (a, b) {
            (Ok(won), Err(lost)) => (won, lost, b"a".to_vec()),
            (Err(lost), Ok(won)) => (won, lost, b"b".to_vec()),
            both => panic!("one write must win, one lose: {both:?}"),
        };
        assert!(matches!(lost, StoreError::Conflict { .. }), "{lost:?}");
        let entry = store.get(&k).await.unwrap().expect("the record");
        assert_eq!((entry.value, entry.revision), (value, won));
    }
}

/// `delete` removes a record (and of an absent one is no error); the key can then be
/// created again, at a higher revision.
pub async fn delete_removes_and_the_key_can_be_made_again(store: &dyn GuardStore) {
    for space in SPACES {
        let k = key(space, "c1");
        let first = store.create(&k, b"1".to_vec()).await.unwrap();
        store.delete(&k).await.unwrap();
        assert_eq!(store.get(&k).await.unwrap(), None);
        store.delete(&k).await.unwrap();
        store.delete(&key(space, "never")).await.unwrap();
        let again = store.create(&k, b"2".to_vec()).await.unwrap();
        assert!(again > first, "{again} after {first}");
        let stale = store.update(&k, b"x".to_vec(), first).await;
        assert!(
            matches!(stale, Err(StoreError::Conflict { .. })),
            "{stale:?}"
        );
        let entry = store.get(&k).await.unwrap().expect("the record");
        assert_eq!((entry.value, entry.revision), (b"2".to_vec(), again));
    }
}

/// `keys` lists the keys that start with the prefix (text, not tokens), in key order,
/// each once, without deleted ones.
pub async fn keys_lists_by_prefix_in_key_order(store: &dyn GuardStore) {
    let names = ["b.2", "a.1", "b.1", "b2.1", "ab.1"];
    for space in SPACES {
        for name in names {
            store
                .create(&format!("{space}.t.{name}"), vec![])
                .await
                .unwrap();
        }
    }
    let keys = |prefix: String| async move { store.keys(&prefix).await.unwrap() };
    for space in SPACES {
        let k = |name: &str| format!("{space}.t.{name}");
        assert_eq!(keys(k("b.")).await, [k("b.1"), k("b.2")]);
        assert_eq!(keys(k("b")).await, [k("b.1"), k("b.2"), k("b2.1")]);
        assert_eq!(keys(k("a")).await, [k("a.1"), k("ab.1")]);
        let mut all: Vec<String> = names.iter().map(|name| k(name)).collect();
        all.sort();
        assert_eq!(keys(format!("{space}.")).await, all, "only its own space");
        assert!(keys(k("c.")).await.is_empty());
        assert!(keys(format!("{space}.nothing.")).await.is_empty());
        assert!(keys("nothing.".to_owned()).await.is_empty());

        store.delete(&k("b.1")).await.unwrap();
        assert_eq!(keys(k("b")).await, [k("b.2"), k("b2.1")]);
        // Written again and again, a key is listed once.
        let revision = store.create(&k("b.1"), vec![1]).await.unwrap();
        store.update(&k("b.1"), vec![2], revision).await.unwrap();
        assert_eq!(keys(k("b.")).await, [k("b.1"), k("b.2")]);
    }
}

/// A key that is not `.`-separated tokens of `[A-Za-z0-9_-]` is refused by `create`
/// and `update`, and nothing is written.
pub async fn bad_keys_are_refused(store: &dyn GuardStore) {
    for space in SPACES {
        let good = store.create(&key(space, "good"), vec![]).await.unwrap();
        for bad in [
            String::new(),
            format!("{space}..x"),
            format!(".{space}"),
            format!("{space}."),
            format!("{space}.t r"),
            format!("{space}.*"),
            format!("{space}.t.r.c*"),
            format!("{space}.>"),
            format!("{space}.é"),
            format!("{space}/x"),
        ] {
            let created = store.create(&bad, vec![]).await;
            assert!(
                matches!(&created, Err(StoreError::InvalidKey(k)) if *k == bad),
                "{bad:?}: {created:?}"
            );
            let updated = store.update(&bad, vec![], good).await;
            assert!(
                matches!(&updated, Err(StoreError::InvalidKey(k)) if *k == bad),
                "{bad:?}: {updated:?}"
            );
        }
        assert_eq!(
            store.keys(&format!("{space}.")).await.unwrap(),
            [key(space, "good")]
        );
    }
}

/// `retire` and `age` answer for a key that is absent (`age`: `None`) as for any other.
pub async fn retire_and_age_take_any_key(store: &dyn GuardStore) {
    for space in SPACES {
        let absent = key(space, "absent");
        store.retire(&absent).await.unwrap();
        assert_eq!(store.age(&absent).await.unwrap(), None);
        let k = key(space, "present");
        let revision = store.create(&k, b"1".to_vec()).await.unwrap();
        store.retire(&k).await.unwrap();
        if let Some((at, _age)) = store.age(&k).await.unwrap() {
            assert_eq!(at, revision, "the age of the current revision");
        }
    }
}
