//! Property tests of the entry tree against a parent-map model.

use super::*;

#[derive(Clone, Debug)]
struct TreeChoice {
    dup: u8,
    id_k: usize,
    parent_kind: u8,
    parent_k: usize,
    ts: (Option<M>, Option<i64>),
    kind: u8,
    target_k: usize,
    label: u8,
}

fn tree_choice() -> impl Strategy<Value = TreeChoice> {
    (
        any::<u8>(),
        any::<usize>(),
        any::<u8>(),
        any::<usize>(),
        timestamp(),
        any::<u8>(),
        any::<usize>(),
        any::<u8>(),
    )
        .prop_map(
            |(dup, id_k, parent_kind, parent_k, ts, kind, target_k, label)| TreeChoice {
                dup,
                id_k,
                parent_kind,
                parent_k,
                ts,
                kind,
                target_k,
                label,
            },
        )
}

/// A generated tree file and the model of it. Record indices: the header is 0, entry `i`
/// is `i + 1`.
struct TreeFile {
    text: String,
    /// Per record: the entry id (empty for the header).
    ids: Vec<String>,
    /// Per record: the `parentId` when it is a string.
    parents: Vec<Option<String>>,
    /// Per record: the timestamp in milliseconds, `None` when JavaScript reads NaN.
    times: Vec<Option<i64>>,
    /// Last label per target, in file order.
    labels: HashMap<String, String>,
    /// Every id used anywhere, plus ids that do not exist.
    probe_ids: Vec<String>,
}

fn build_tree_file(choices: &[TreeChoice]) -> TreeFile {
    let n = choices.len();
    let mut ids: Vec<String> = Vec::with_capacity(n);
    for (i, c) in choices.iter().enumerate() {
        ids.push(if i > 0 && c.dup < 26 {
            ids[c.id_k % i].clone()
        } else {
            format!("e{i}")
        });
    }
    let mut records = vec![header_v5()];
    let mut file = TreeFile {
        text: String::new(),
        ids: vec![String::new()],
        parents: vec![None],
        times: vec![None],
        labels: HashMap::new(),
        probe_ids: ids.clone(),
    };
    file.probe_ids
        .extend(["ghost0", "ghost1", "e999"].map(String::from));
    for (i, c) in choices.iter().enumerate() {
        let parent = match c.parent_kind % 16 {
            0 | 1 => Some(M::Null),
            2 => Some(jstr(&format!("ghost{}", c.parent_k % 2))),
            3 => Some(jstr(&ids[i])),
            4 if i + 1 < n => Some(jstr(&ids[i + 1 + c.parent_k % (n - i - 1)])),
            5 => None,
            6 => Some(int(7)),
            7..=10 if i > 0 => Some(jstr(&ids[0])),
            _ if i > 0 => Some(jstr(&ids[c.parent_k % i])),
            _ => Some(M::Null),
        };
        let kind = match c.kind % 5 {
            0 => "label",
            1 => "custom",
            2 => "thinking_level_change",
            _ => "message",
        };
        let mut entry = obj(vec![("type", jstr(kind)), ("id", jstr(&ids[i]))]);
        if let Some(p) = &parent {
            entry.set("parentId", p.clone());
        }
        if let Some(t) = &c.ts.0 {
            entry.set("timestamp", t.clone());
        }
        match kind {
            "label" => {
                let target = &file.probe_ids[c.target_k % file.probe_ids.len()];
                entry.set("targetId", jstr(target));
                match c.label % 4 {
                    0 => {
                        file.labels.remove(target);
                    }
                    1 => {
                        entry.set("label", jstr(""));
                        file.labels.remove(target);
                    }
                    2 => {
                        entry.set("label", M::Null);
                        file.labels.remove(target);
                    }
                    _ => {
                        let name = format!("name{}", c.label);
                        entry.set("label", jstr(&name));
                        file.labels.insert(target.clone(), name);
                    }
                }
            }
            "custom" => entry.set("customType", jstr("c")),
            "thinking_level_change" => entry.set("thinkingLevel", jstr("high")),
            _ => entry.set(
                "message",
                obj(vec![("role", jstr("user")), ("content", jstr("x"))]),
            ),
        }
        records.push(entry);
        file.ids.push(ids[i].clone());
        file.parents.push(match parent {
            Some(M::Str(s)) => Some(String::from_utf16(&s).expect("ASCII id")),
            _ => None,
        });
        file.times.push(c.ts.1);
    }
    file.text = jsonl(&records);
    file
}

/// The plain id → parentId map, last occurrence wins.
struct TreeModel<'a> {
    file: &'a TreeFile,
    by_id: HashMap<&'a str, usize>,
}

impl<'a> TreeModel<'a> {
    fn new(file: &'a TreeFile) -> Self {
        let by_id = (1..file.ids.len())
            .map(|r| (file.ids[r].as_str(), r))
            .collect();
        TreeModel { file, by_id }
    }

    fn parent(&self, r: usize) -> Option<usize> {
        let p = self.file.parents[r].as_deref()?;
        self.by_id.get(p).copied()
    }

    /// Root-first path to `r`, stopping at a repeated entry or an unknown parent.
    fn path(&self, r: usize) -> Vec<usize> {
        let mut seen = HashSet::new();
        let mut path = Vec::new();
        let mut at = Some(r);
        while let Some(i) = at {
            if !seen.insert(i) {
                break;
            }
            path.push(i);
            at = self.parent(i);
        }
        path.reverse();
        path
    }

    /// The members of the parent cycle through `r`, if `r` is on one.
    fn cycle_through(&self, r: usize) -> Option<Vec<usize>> {
        let mut members = vec![r];
        let mut at = self.parent(r)?;
        while at != r {
            if members.contains(&at) || members.len() > self.file.ids.len() {
                return None;
            }
            members.push(at);
            at = self.parent(at)?;
        }
        Some(members)
    }

    /// Sort key of the tree's child order: valid timestamps ascending, unparsable ones last.
    fn time_key(&self, r: usize) -> (bool, i64) {
        let t = self.file.times[r];
        (t.is_none(), t.unwrap_or(0))
    }
}

fn check_tree(session: &Session, model: &TreeModel<'_>) -> Result<(), TestCaseError> {
    let n = model.file.ids.len();
    let tree = session.tree();
    let indexed: Vec<usize> = (1..n)
        .filter(|&r| model.by_id[&*model.file.ids[r]] == r)
        .collect();

    // Every indexed entry is reachable from the roots exactly once; nothing else is there.
    let mut visits = vec![0usize; n];
    let mut stack = tree.roots.clone();
    while let Some(x) = stack.pop() {
        visits[x] += 1;
        prop_assert_eq!(visits[x], 1, "entry {} reached twice", x);
        stack.extend(&tree.children[x]);
    }
    let listed = tree.roots.len() + tree.children.iter().map(Vec::len).sum::<usize>();
    prop_assert_eq!(listed, indexed.len());
    for (r, &count) in visits.iter().enumerate() {
        prop_assert_eq!(count, usize::from(indexed.contains(&r)), "entry {}", r);
    }

    // A child sits under the parent the map names.
    for (p, children) in tree.children.iter().enumerate() {
        for &c in children {
            prop_assert_eq!(model.parent(c), Some(p), "child {} of {}", c, p);
            prop_assert_ne!(c, p);
        }
        for pair in children.windows(2) {
            let (a, b) = (model.time_key(pair[0]), model.time_key(pair[1]));
            prop_assert!(
                a < b || (a == b && pair[0] < pair[1]),
                "children of {} out of order: {:?}",
                p,
                children
            );
        }
    }

    // A root has no resolvable parent, is its own parent, or breaks a cycle — one per cycle.
    let mut broken_cycles = HashSet::new();
    for &r in &tree.roots {
        match model.parent(r) {
            None => {}
            Some(p) if p == r => {}
            Some(_) => {
                let cycle = model.cycle_through(r);
                prop_assert!(
                    cycle.is_some(),
                    "root {} has a parent and is on no cycle",
                    r
                );
                let cycle = cycle.unwrap_or_default();
                let key = cycle.iter().min().copied();
                prop_assert!(broken_cycles.insert(key), "cycle {:?} broken twice", cycle);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(192))]

    #[test]
    fn tree_paths_labels_and_branching_follow_the_parent_map(
        choices in prop::collection::vec(tree_choice(), 0..80)
    ) {
        let file = build_tree_file(&choices);
        let replayed = parse_session_entries(&file.text).map_err(fail)?;
        prop_assert!(replayed.skipped.is_empty());
        let session = Session::from_records(replayed.records);
        let model = TreeModel::new(&file);
        let n = file.ids.len();

        // Paths, from every record (shadowed duplicates included).
        for r in 1..n {
            prop_assert_eq!(session.path_to(r), model.path(r), "path to {}", r);
        }

        // The leaf is the last entry; branching moves it exactly to known ids.
        prop_assert_eq!(session.leaf(), (n > 1).then_some(n - 1));
        let leaf_ids: Vec<&str> = session
            .branch_path(None)
            .map_err(fail)?
            .iter()
            .filter_map(|rec| rec.id())
            .collect();
        let model_leaf_ids: Vec<&str> = if n > 1 {
            model.path(n - 1).iter().map(|&i| file.ids[i].as_str()).collect()
        } else {
            Vec::new()
        };
        prop_assert_eq!(leaf_ids, model_leaf_ids);
        for id in &file.probe_ids {
            let known = model.by_id.get(id.as_str()).copied();
            let mut moved = session.clone();
            prop_assert_eq!(moved.branch(id).is_ok(), known.is_some(), "branch({})", id);
            prop_assert_eq!(session.branch_path(Some(id)).is_ok(), known.is_some());
            if let Some(r) = known {
                prop_assert_eq!(moved.leaf(), Some(r));
                prop_assert_eq!(moved.leaf_id(), Some(id.as_str()));
                let expected: Vec<&str> = model.path(r).iter().map(|&i| file.ids[i].as_str()).collect();
                let from_leaf: Vec<&str> = moved
                    .branch_path(None)
                    .map_err(fail)?
                    .iter()
                    .filter_map(|rec| rec.id())
                    .collect();
                prop_assert_eq!(&from_leaf, &expected);
                let from_id: Vec<&str> = session
                    .branch_path(Some(id))
                    .map_err(fail)?
                    .iter()
                    .filter_map(|rec| rec.id())
                    .collect();
                prop_assert_eq!(&from_id, &expected);
            }
        }
        let mut reset = session.clone();
        reset.reset_leaf();
        prop_assert!(reset.branch_path(None).map_err(fail)?.is_empty());
        prop_assert!(reset.build_context().messages.is_empty());

        // Labels: the last label entry per target wins; empty or absent clears.
        prop_assert_eq!(session.labels(), &file.labels);
        for id in &file.probe_ids {
            prop_assert_eq!(session.label(id), file.labels.get(id).map(String::as_str));
        }

        check_tree(&session, &model)?;
    }
}

proptest! {
    #![proptest_config(cases(256))]

    /// The index is the same however it was built: at once, from summaries, in steps of
    /// appended records, or entry by entry — and popping entries restores the earlier one.
    /// The trees have duplicate ids, dangling, forward, self and non-string parents.
    #[test]
    fn an_index_built_in_steps_equals_one_built_at_once(
        choices in prop::collection::vec(tree_choice(), 0..60),
        cuts in prop::collection::vec(any::<Index>(), 0..4),
        pushed_from in any::<Index>(),
    ) {
        let file = build_tree_file(&choices);
        let records = parse_session_entries(&file.text).map_err(fail)?.records;
        let whole = Session::from_records(records.clone());
        let summaries: Vec<Summary> = records.iter().map(Summary::of).collect();
        prop_assert_eq!(&Session::from_summarized(records.clone(), &summaries), &whole);

        let mut cuts: Vec<usize> = cuts.iter().map(|c| 1 + c.index(records.len())).collect();
        cuts.push(records.len());
        cuts.sort_unstable();
        cuts.dedup();
        let mut stepped = Session::from_records(records[..cuts[0]].to_vec());
        for pair in cuts.windows(2) {
            stepped.extend(records[pair[0]..pair[1]].to_vec());
        }
        prop_assert_eq!(&stepped, &whole);

        let k = 1 + pushed_from.index(records.len());
        let base = Session::from_records(records[..k].to_vec());
        let mut pushed = base.clone();
        for record in &records[k..] {
            pushed.push_entry(record.clone());
        }
        prop_assert_eq!(&pushed, &whole);
        for _ in k..records.len() {
            pushed.pop_entry(base.leaf());
        }
        prop_assert_eq!(&pushed, &base);
    }
}
