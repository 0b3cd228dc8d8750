//! The [`GuardStore`] contract: create-if-absent, compare-and-set on revisions, read,
//! delete, list by prefix, each in two key spaces that never meet.
//!
//! Every case runs in both [`RecordKind`]s, one after the other, with the same keys: the
//! guard's call records and the handler's other records (approvals, budgets). The
//! JetStream store keeps the first kind on the facts stream and the second in a KV
//! bucket; the contract is the same for both, and since the second kind's pass starts
//! on keys the first one wrote, every case also checks that a record of one kind is
//! never found as one of the other. [`the_two_kinds_are_kept_apart`] says so outright.
//!
//! Revisions are compared within one kind: the JetStream store numbers its two places
//! apart, so a revision of one says nothing about one of the other.

use aaa_guard::{GuardStore, RecordKind, StoreError};

/// `t.r.<name>`.
fn key(name: &str) -> String {
    format!("t.r.{name}")
}

/// `create` makes a record that is absent, and only then; `get` reads it back as
/// written, with the revision `create` gave.
pub async fn create_makes_a_record_only_when_absent(store: &dyn GuardStore) {
    for kind in RecordKind::ALL {
        let k = key("c1");
        assert_eq!(store.get(kind, &k).await.unwrap(), None);
        let revision = store.create(kind, &k, b"1".to_vec()).await.unwrap();
        let again = store.create(kind, &k, b"x".to_vec()).await;
        assert!(
            matches!(&again, Err(StoreError::Exists { key }) if *key == k),
            "{again:?}"
        );
        let entry = store.get(kind, &k).await.unwrap().expect("the record");
        assert_eq!((entry.value, entry.revision), (b"1".to_vec(), revision));
    }
}

/// Values come back byte for byte: empty, binary, large.
pub async fn values_come_back_as_written(store: &dyn GuardStore) {
    let binary: Vec<u8> = (0..=255).collect();
    let large: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
    for kind in RecordKind::ALL {
        for (name, value) in [
            ("empty", Vec::new()),
            ("binary", binary.clone()),
            ("large", large.clone()),
        ] {
            let k = key(name);
            let revision = store.create(kind, &k, value.clone()).await.unwrap();
            let entry = store.get(kind, &k).await.unwrap().expect("the record");
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
    for kind in RecordKind::ALL {
        let k = key("c1");
        let first = store.create(kind, &k, b"1".to_vec()).await.unwrap();
        let second = store.update(kind, &k, b"2".to_vec(), first).await.unwrap();
        assert!(second > first, "{second} after {first}");
        let third = store.update(kind, &k, b"3".to_vec(), second).await.unwrap();
        assert!(third > second, "{third} after {second}");

        let stale = store.update(kind, &k, b"stale".to_vec(), second).await;
        assert!(
            matches!(&stale, Err(StoreError::Conflict { key, expected, .. })
                if *key == k && *expected == second),
            "{stale:?}"
        );
        let entry = store.get(kind, &k).await.unwrap().expect("the record");
        assert_eq!((entry.value, entry.revision), (b"3".to_vec(), third));

        let missing = key("missing");
        let gone = store.update(kind, &missing, b"x".to_vec(), third).await;
        assert!(
            matches!(&gone, Err(StoreError::Conflict { key, found: None, .. }) if *key == missing),
            "{gone:?}"
        );
        assert_eq!(
            store.get(kind, &missing).await.unwrap(),
            None,
            "nothing was written"
        );
    }
}

/// Of two writers that read the same revision, one wins and the other is told.
pub async fn of_two_writers_one_wins(store: &dyn GuardStore) {
    for kind in RecordKind::ALL {
        let k = key("race");
        let read = store.create(kind, &k, b"0".to_vec()).await.unwrap();
        let (a, b) = futures::join!(
            store.update(kind, &k, b"a".to_vec(), read),
            store.update(kind, &k, b"b".to_vec(), read)
        );
        let (won, lost, value) = match (a, b) {
            (Ok(won), Err(lost)) => (won, lost, b"a".to_vec()),
            (Err(lost), Ok(won)) => (won, lost, b"b".to_vec()),
            both => panic!("one write must win, one lose: {both:?}"),
        };
        assert!(matches!(lost, StoreError::Conflict { .. }), "{lost:?}");
        let entry = store.get(kind, &k).await.unwrap().expect("the record");
        assert_eq!((entry.value, entry.revision), (value, won));
    }
}

/// `delete` removes a record (and of an absent one is no error); the key can then be
/// created again, at a higher revision.
pub async fn delete_removes_and_the_key_can_be_made_again(store: &dyn GuardStore) {
    for kind in RecordKind::ALL {
        let k = key("c1");
        let first = store.create(kind, &k, b"1".to_vec()).await.unwrap();
        store.delete(kind, &k).await.unwrap();
        assert_eq!(store.get(kind, &k).await.unwrap(), None);
        store.delete(kind, &k).await.unwrap();
        store.delete(kind, &key("never")).await.unwrap();
        let again = store.create(kind, &k, b"2".to_vec()).await.unwrap();
        assert!(again > first, "{again} after {first}");
        let stale = store.update(kind, &k, b"x".to_vec(), first).await;
        assert!(
            matches!(stale, Err(StoreError::Conflict { .. })),
            "{stale:?}"
        );
        let entry = store.get(kind, &k).await.unwrap().expect("the record");
        assert_eq!((entry.value, entry.revision), (b"2".to_vec(), again));
    }
}

/// `keys` lists the keys of its kind that start with the prefix (text, not tokens), in
/// key order, each once, without deleted ones, and never a key of the other kind.
pub async fn keys_lists_by_prefix_in_key_order(store: &dyn GuardStore) {
    let names = ["b.2", "a.1", "b.1", "b2.1", "ab.1"];
    for kind in RecordKind::ALL {
        for name in names {
            store
                .create(kind, &format!("s.t.{name}"), vec![])
                .await
                .unwrap();
        }
        // And one key of its own.
        store
            .create(kind, &format!("s.{kind}.own"), vec![])
            .await
            .unwrap();
    }
    for kind in RecordKind::ALL {
        let keys = |prefix: String| async move { store.keys(kind, &prefix).await.unwrap() };
        let k = |name: &str| format!("s.t.{name}");
        assert_eq!(keys(k("b.")).await, [k("b.1"), k("b.2")]);
        assert_eq!(keys(k("b")).await, [k("b.1"), k("b.2"), k("b2.1")]);
        assert_eq!(keys(k("a")).await, [k("a.1"), k("ab.1")]);
        let mut all: Vec<String> = names.iter().map(|name| k(name)).collect();
        all.sort();
        assert_eq!(keys("s.t.".to_owned()).await, all);
        let own = format!("s.{kind}.own");
        assert_eq!(keys(format!("s.{kind}.")).await, [own], "its own key");
        for other in RecordKind::ALL.into_iter().filter(|other| *other != kind) {
            let theirs = keys(format!("s.{other}.")).await;
            assert!(theirs.is_empty(), "{kind} lists {other}'s keys: {theirs:?}");
        }
        assert!(keys(k("c.")).await.is_empty());
        assert!(keys("s.nothing.".to_owned()).await.is_empty());
        assert!(keys("nothing.".to_owned()).await.is_empty());

        store.delete(kind, &k("b.1")).await.unwrap();
        assert_eq!(keys(k("b")).await, [k("b.2"), k("b2.1")]);
        // Written again and again, a key is listed once.
        let revision = store.create(kind, &k("b.1"), vec![1]).await.unwrap();
        store
            .update(kind, &k("b.1"), vec![2], revision)
            .await
            .unwrap();
        assert_eq!(keys(k("b.")).await, [k("b.1"), k("b.2")]);
    }
}

/// A key that is not `.`-separated tokens of `[A-Za-z0-9_-]` is refused by `create`
/// and `update`, and nothing is written.
pub async fn bad_keys_are_refused(store: &dyn GuardStore) {
    for kind in RecordKind::ALL {
        let good = store.create(kind, &key("good"), vec![]).await.unwrap();
        for bad in [
            "", "a..x", ".a", "a.", "a.t r", "a.*", "t.r.c*", "a.>", "a.é", "a/x",
        ] {
            let created = store.create(kind, bad, vec![]).await;
            assert!(
                matches!(&created, Err(StoreError::InvalidKey(k)) if *k == bad),
                "{kind} {bad:?}: {created:?}"
            );
            let updated = store.update(kind, bad, vec![], good).await;
            assert!(
                matches!(&updated, Err(StoreError::InvalidKey(k)) if *k == bad),
                "{kind} {bad:?}: {updated:?}"
            );
        }
        assert_eq!(store.keys(kind, "").await.unwrap(), [key("good")]);
    }
}

/// `retire` takes any call record's key (an absent one too) and touches no record of
/// the other kind; `age` answers for a key that is absent (`None`) as for any other.
pub async fn retire_and_age_take_any_key(store: &dyn GuardStore) {
    let (absent, present) = (key("absent"), key("present"));
    store.retire(&absent).await.unwrap();
    for kind in RecordKind::ALL {
        assert_eq!(store.age(kind, &absent).await.unwrap(), None);
        let revision = store.create(kind, &present, b"1".to_vec()).await.unwrap();
        store.retire(&present).await.unwrap();
        if let Some((at, _age)) = store.age(kind, &present).await.unwrap() {
            assert_eq!(at, revision, "the age of the current revision");
        }
    }
    let handler = store.get(RecordKind::Handler, &present).await.unwrap();
    assert_eq!(handler.map(|e| e.value), Some(b"1".to_vec()));
}

/// The two kinds are two key spaces: the same key names a record of each, created,
/// read, updated, deleted and listed apart.
pub async fn the_two_kinds_are_kept_apart(store: &dyn GuardStore) {
    let (call, handler) = (RecordKind::Call, RecordKind::Handler);
    let k = key("both");
    let call_rev = store.create(call, &k, b"call".to_vec()).await.unwrap();
    assert_eq!(store.get(handler, &k).await.unwrap(), None);
    assert_eq!(store.keys(handler, "").await.unwrap(), Vec::<String>::new());
    let handler_rev = store
        .create(handler, &k, b"handler".to_vec())
        .await
        .unwrap();
    let read = |kind| async move { store.get(kind, &key("both")).await.unwrap().unwrap() };
    assert_eq!(
        (read(call).await.value, read(call).await.revision),
        (b"call".to_vec(), call_rev)
    );
    assert_eq!(
        (read(handler).await.value, read(handler).await.revision),
        (b"handler".to_vec(), handler_rev)
    );
    // An update of one leaves the other as it was.
    let call_rev = store
        .update(call, &k, b"call 2".to_vec(), call_rev)
        .await
        .unwrap();
    assert_eq!(read(handler).await.value, b"handler");
    let handler_rev = store
        .update(handler, &k, b"handler 2".to_vec(), handler_rev)
        .await
        .unwrap();
    assert_eq!(
        (read(call).await.value, read(call).await.revision),
        (b"call 2".to_vec(), call_rev)
    );
    // A key of one kind only is listed in that kind only.
    store.create(call, &key("call-only"), vec![]).await.unwrap();
    store
        .create(handler, &key("handler-only"), vec![])
        .await
        .unwrap();
    assert_eq!(
        store.keys(call, "").await.unwrap(),
        [key("both"), key("call-only")]
    );
    assert_eq!(
        store.keys(handler, "t.").await.unwrap(),
        [key("both"), key("handler-only")]
    );
    assert_eq!(store.get(call, &key("handler-only")).await.unwrap(), None);
    assert_eq!(store.get(handler, &key("call-only")).await.unwrap(), None);
    // A delete of one leaves the other.
    store.delete(call, &k).await.unwrap();
    assert_eq!(store.get(call, &k).await.unwrap(), None);
    let left = store
        .get(handler, &k)
        .await
        .unwrap()
        .expect("the handler record");
    assert_eq!(
        (left.value, left.revision),
        (b"handler 2".to_vec(), handler_rev)
    );
    assert_eq!(store.keys(call, "").await.unwrap(), [key("call-only")]);
    assert_eq!(
        store.keys(handler, "").await.unwrap(),
        [key("both"), key("handler-only")]
    );
}
