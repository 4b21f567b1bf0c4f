//! Stage 5 in this process, for a run on its own with the default `--keep first`: the members
//! (sql/05_group_members.sql) sorted by component and input order give each group's
//! representative (its first member), its size and its number, and the table is written by
//! sql/05_groups_numbered.sql. sql/05_groups.sql writes the same table with joins and a window;
//! it still runs on a cluster, for the other `--keep` rules, for 128-bit fingerprints, and when
//! the memory pool refuses the members. At 4M fingerprints its members, representatives and
//! group numbers took 0.38 s of a 1.9 s `match`, most of it probing hash tables.

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, UInt8Array, UInt32Array, UInt64Array,
};
use datafusion::arrow::compute::{concat, take};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, UInt64Type};
use datafusion::catalog::MemTable;
use datafusion::error::Result as DataFusionResult;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use rayon::slice::ParallelSliceMut;

use crate::engine::sql::{Bindings, run_stage, stage_frame};
use crate::engine::stages;
use crate::error::{QueryContext, Result};
use crate::fingerprint::hamming;
use crate::job::cores::on_every_core;

/// The table sql/05_groups_numbered.sql reads.
const TABLE: &str = "numbered_groups";

/// Rows per batch of `TABLE`.
const BATCH_ROWS: usize = 1 << 16;

/// Bytes a member holds while it is sorted and numbered besides its id: its sort key
/// (component, input order, row), its fingerprint, and its output row (row, group number,
/// representative's row, size, distance).
const BYTES_PER_MEMBER: usize = 24 + 8 + (4 + 8 + 4 + 8 + 1);

/// Copies of an id held at once: the input's, the output's `id` and `representative_id`.
const ID_COPIES: usize = 3;

/// Writes `groups` for a run without an index: by sorting when `sortable` (this process, the
/// default `--keep`, 64-bit fingerprints) and the pool holds the members, else by
/// sql/05_groups.sql.
pub async fn write(ctx: &SessionContext, bindings: &Bindings, sortable: bool) -> Result<()> {
    let members = match sortable {
        true => {
            let started = Instant::now();
            let members = Members::collect(ctx, bindings).await?;
            let seconds = started.elapsed().as_secs_f64();
            log::debug!("{}: read in {seconds:.3} s", stages::GROUP_MEMBERS.name);
            members
        }
        false => None,
    };
    let Some(members) = members else {
        return run_stage(ctx, &stages::GROUPS, bindings).await;
    };
    let what = || stages::GROUPS_NUMBERED.name.to_string();
    let partitions = ctx.copied_config().target_partitions().max(1);
    let started = Instant::now();
    let count = members.keys.len();
    let numbered = on_every_core(ctx, &what(), move || members.numbered(partitions))
        .await?
        .context(what)?;
    log::debug!(
        "{}: {count} members numbered in {:.3} s",
        what(),
        started.elapsed().as_secs_f64()
    );
    let (schema, partitions, _reservation) = numbered;
    let table = MemTable::try_new(schema, partitions).context(what)?;
    ctx.register_table(TABLE, Arc::new(table)).context(what)?;
    let written = run_stage(ctx, &stages::GROUPS_NUMBERED, bindings).await;
    ctx.deregister_table(TABLE).context(what)?;
    written
}

/// Every member, as sql/05_group_members.sql gives them, with the pool's account of them.
struct Members {
    /// The id column's field, for the output's `id` and `representative_id`.
    id_field: Field,
    /// The ids, a batch at a time; row `r` of the members is the `r`-th id across them.
    ids: Vec<ArrayRef>,
    simhashes: Vec<u64>,
    /// (component, input order, row), sorted by `numbered`.
    keys: Vec<(u64, i64, u32)>,
    reservation: MemoryReservation,
}

/// The numbered table: its schema, its partitions, and the memory it holds.
type Numbered = (SchemaRef, Vec<Vec<RecordBatch>>, MemoryReservation);

impl Members {
    /// The members, or `None` when the pool refuses them or a column is not what sorting
    /// expects (a NULL, an input order that is not a BIGINT, more rows than a u32 counts): the
    /// SQL then decides.
    async fn collect(ctx: &SessionContext, bindings: &Bindings) -> Result<Option<Members>> {
        let stage = &stages::GROUP_MEMBERS;
        let what = || stage.name.to_string();
        let frame = stage_frame(ctx, stage, bindings).await?;
        let id_field = frame.schema().field(0).as_ref().clone();
        let reservation =
            MemoryConsumer::new("group members").register(&ctx.runtime_env().memory_pool);
        let mut members = Members {
            id_field,
            ids: Vec::new(),
            simhashes: Vec::new(),
            keys: Vec::new(),
            reservation,
        };
        let mut stream = frame.execute_stream().await.context(what)?;
        while let Some(batch) = stream.next().await {
            let batch = batch.context(what)?;
            let bytes = ID_COPIES * batch.column(0).get_array_memory_size()
                + batch.num_rows() * BYTES_PER_MEMBER;
            if members.reservation.try_grow(bytes).is_err() || !members.add(&batch) {
                log::debug!("{}: grouped by SQL instead", what());
                return Ok(None);
            }
        }
        Ok(Some(members))
    }

    /// Adds a batch of (id, simhash, input_order, component); false if it cannot be sorted.
    fn add(&mut self, batch: &RecordBatch) -> bool {
        let (Some(simhash), Some(order), Some(component)) = (
            batch.column(1).as_primitive_opt::<UInt64Type>(),
            batch.column(2).as_primitive_opt::<Int64Type>(),
            batch.column(3).as_primitive_opt::<UInt64Type>(),
        ) else {
            return false;
        };
        let nulls = simhash.null_count() + order.null_count() + component.null_count();
        let first = self.simhashes.len();
        let Ok(last) = u32::try_from(first + batch.num_rows()) else {
            return false;
        };
        if nulls > 0 || batch.column(0).logical_null_count() > 0 {
            return false;
        }
        self.ids.push(Arc::clone(batch.column(0)));
        self.simhashes.extend_from_slice(simhash.values());
        let rows = first as u32..last;
        self.keys.extend(
            component
                .values()
                .iter()
                .zip(order.values())
                .zip(rows)
                .map(|((&component, &order), row)| (component, order, row)),
        );
        true
    }

    /// The groups table, in `partitions` partitions: members sorted by component then input
    /// order make each component a run whose first member is its representative (input order
    /// is unique in a run), and the runs sorted by their first member's input order are the
    /// groups in number order. Rows come by group number, then input order. The sorts run on
    /// the current rayon pool (`crate::job::cores`); filling the rows on every core as well,
    /// each partition's on its own, was slower at ten million members (docs/BENCHMARKS.md).
    fn numbered(mut self, partitions: usize) -> DataFusionResult<Numbered> {
        self.keys.par_sort_unstable();
        // (representative's input order, first key, members) of each component.
        let mut runs: Vec<(i64, usize, usize)> = Vec::new();
        let mut start = 0;
        for run in self.keys.chunk_by(|a, b| a.0 == b.0) {
            runs.push((run[0].1, start, run.len()));
            start += run.len();
        }
        runs.par_sort_unstable();
        let total = self.keys.len();
        let mut rows = Vec::with_capacity(total);
        let mut group_ids = Vec::with_capacity(total);
        let mut representatives = Vec::with_capacity(total);
        let mut sizes = Vec::with_capacity(total);
        let mut distances = Vec::with_capacity(total);
        for (number, &(_, start, size)) in runs.iter().enumerate() {
            let run = &self.keys[start..start + size];
            let representative = run[0].2;
            let representative_simhash = self.simhashes[representative as usize];
            for &(_, _, row) in run {
                rows.push(row);
                group_ids.push(number as u64 + 1);
                representatives.push(representative);
                sizes.push(size as i64);
                let distance = hamming(self.simhashes[row as usize], representative_simhash);
                distances.push(distance as u8);
            }
        }
        drop(runs);
        drop(std::mem::take(&mut self.keys));
        drop(std::mem::take(&mut self.simhashes));
        let ids: Vec<&dyn Array> = self.ids.iter().map(|ids| ids.as_ref()).collect();
        let ids = match ids.is_empty() {
            true => datafusion::arrow::array::new_empty_array(self.id_field.data_type()),
            false => concat(&ids)?,
        };
        self.ids.clear();
        let id = self.id_field.clone().with_name("id");
        let representative_id = self.id_field.clone().with_name("representative_id");
        let schema = Arc::new(Schema::new(vec![
            id,
            Field::new("group_id", DataType::UInt64, false),
            representative_id,
            Field::new("group_size", DataType::Int64, false),
            // As sql/05_groups.sql's `hamming(...)` gives it.
            Field::new("distance", DataType::UInt8, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            take(&ids, &UInt32Array::from(rows), None)?,
            Arc::new(UInt64Array::from(group_ids)),
            take(&ids, &UInt32Array::from(representatives), None)?,
            Arc::new(Int64Array::from(sizes)),
            Arc::new(UInt8Array::from(distances)),
        ];
        let all = RecordBatch::try_new(Arc::clone(&schema), columns)?;
        // Reserved for while the members were sorted; now what the table holds.
        self.reservation.resize(all.get_array_memory_size());
        Ok((schema, split(&all, partitions), self.reservation))
    }
}

/// `all` in `partitions` runs of consecutive rows, each in batches of at most `BATCH_ROWS`
/// (slices, no copy): the COPY writes the partitions side by side.
fn split(all: &RecordBatch, partitions: usize) -> Vec<Vec<RecordBatch>> {
    let per_partition = all.num_rows().div_ceil(partitions).max(1);
    (0..partitions)
        .map(|partition| {
            let start = (partition * per_partition).min(all.num_rows());
            let end = (start + per_partition).min(all.num_rows());
            (start..end)
                .step_by(BATCH_ROWS)
                .map(|from| all.slice(from, BATCH_ROWS.min(end - from)))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{BooleanArray, StringArray};

    use super::*;
    use crate::engine::sql::folder_literal;
    use crate::job::clustering::union_find::connected_components;
    use crate::job::test_session;
    use crate::rng::SplitMix64;
    use crate::storage::Place;

    /// A document: its id, fingerprint and input order.
    type Document = (String, u64, i64);

    /// A session holding what stage 5 reads for `documents` and fingerprint pairs `edges`
    /// (`paired_documents`, `fingerprints`, `fingerprint_components`), in two partitions each,
    /// bound to write into `dir`.
    fn session(
        documents: &[Document],
        edges: &[(u64, u64)],
        pool: Option<usize>,
        dir: &Place,
    ) -> (SessionContext, Bindings) {
        let ctx = test_session::context(pool);
        for udf in crate::udf::functions() {
            ctx.register_udf(udf.as_ref().clone());
        }
        let register = |name: &str, schema: SchemaRef, columns: Vec<ArrayRef>| {
            let all = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
            let table = MemTable::try_new(schema, split(&all, 2)).unwrap();
            ctx.register_table(name, Arc::new(table)).unwrap();
        };
        let mut counts = std::collections::BTreeMap::new();
        for document in documents {
            *counts.entry(document.1).or_insert(0i64) += 1;
        }
        let components = connected_components(edges.iter().copied());
        let labelled: std::collections::HashSet<u64> = components.iter().map(|c| c.0).collect();
        let paired: Vec<&Document> = documents
            .iter()
            .filter(|d| counts[&d.1] > 1 || labelled.contains(&d.1))
            .collect();
        register(
            "paired_documents",
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Utf8, false),
                Field::new("simhash", DataType::UInt64, false),
                Field::new("batch", DataType::Int64, false),
                Field::new("input_order", DataType::Int64, false),
                Field::new("fresh", DataType::Boolean, false),
                Field::new("keep_key", DataType::Int64, true),
            ])),
            vec![
                Arc::new(StringArray::from_iter_values(paired.iter().map(|d| &d.0))),
                Arc::new(UInt64Array::from_iter_values(paired.iter().map(|d| d.1))),
                Arc::new(Int64Array::from(vec![0; paired.len()])),
                Arc::new(Int64Array::from_iter_values(paired.iter().map(|d| d.2))),
                Arc::new(BooleanArray::from(vec![true; paired.len()])),
                Arc::new(Int64Array::from(vec![None; paired.len()])),
            ],
        );
        register(
            "fingerprints",
            Arc::new(Schema::new(vec![
                Field::new("simhash", DataType::UInt64, false),
                Field::new("document_count", DataType::Int64, false),
            ])),
            vec![
                Arc::new(UInt64Array::from_iter_values(counts.keys().copied())),
                Arc::new(Int64Array::from_iter_values(counts.values().copied())),
            ],
        );
        register(
            "fingerprint_components",
            Arc::new(Schema::new(vec![
                Field::new("simhash", DataType::UInt64, false),
                Field::new("component", DataType::UInt64, false),
            ])),
            vec![
                Arc::new(UInt64Array::from_iter_values(
                    components.iter().map(|c| c.0),
                )),
                Arc::new(UInt64Array::from_iter_values(
                    components.iter().map(|c| c.1),
                )),
            ],
        );
        let mut bindings = Bindings::default();
        bindings
            .set("groups_dir", folder_literal(&dir.join("groups")))
            .set("members_dir", folder_literal(&dir.join("members")))
            .set("representative_order", "min(input_order)")
            .set("work_table_options", test_session::work_table_options());
        (ctx, bindings)
    }

    /// `groups`' schema and its rows in a fixed order, as text.
    async fn groups_table(ctx: &SessionContext) -> (SchemaRef, String) {
        test_session::table_text(ctx, "SELECT * FROM groups ORDER BY group_id, id").await
    }

    /// `groups` numbered by sorting, and by sql/05_groups.sql (what a cluster runs).
    async fn both_ways(documents: &[Document], edges: &[(u64, u64)]) -> [(SchemaRef, String); 2] {
        let dir = tempfile::tempdir().unwrap();
        let mut tables = Vec::new();
        for (name, sortable) in [("sorted", true), ("joined", false)] {
            let place = Place::Local(dir.path().join(name));
            let (ctx, bindings) = session(documents, edges, None, &place);
            write(&ctx, &bindings, sortable).await.unwrap();
            tables.push(groups_table(&ctx).await);
        }
        tables.try_into().unwrap()
    }

    fn document(id: &str, simhash: u64, input_order: i64) -> Document {
        (id.to_string(), simhash, input_order)
    }

    #[tokio::test]
    async fn a_hand_checked_case() {
        // Fingerprints 0b1 and 0b111 are a pair, 0b11 and 0b1111 another, linked by nothing:
        // two components. 0b10000 is shared by two documents and has no pair; 0b100000 has
        // one document and no pair, so it is in no group.
        let documents = [
            document("a", 0b1, 3),
            document("b", 0b1, 1),
            document("c", 0b111, 2),
            document("d", 0b10000, 0),
            document("e", 0b10000, 4),
            document("f", 0b11, 6),
            document("g", 0b1111, 5),
            document("h", 0b100000, 7),
        ];
        let edges = [(0b1, 0b111), (0b11, 0b1111)];
        let [(schema, sorted), (joined_schema, joined)] = both_ways(&documents, &edges).await;
        // Groups by their representative's input order: d (0), b (1), g (5).
        let expected = "\
+----+----------+-------------------+------------+----------+
| id | group_id | representative_id | group_size | distance |
+----+----------+-------------------+------------+----------+
| d  | 1        | d                 | 2          | 0        |
| e  | 1        | d                 | 2          | 0        |
| a  | 2        | b                 | 3          | 0        |
| b  | 2        | b                 | 3          | 0        |
| c  | 2        | b                 | 3          | 2        |
| f  | 3        | g                 | 2          | 2        |
| g  | 3        | g                 | 2          | 0        |
+----+----------+-------------------+------------+----------+";
        assert_eq!(sorted, expected);
        assert_eq!(joined, expected);
        assert_eq!(schema, joined_schema);
    }

    #[tokio::test]
    async fn numbered_by_sorting_as_the_joins_number_them() {
        // Random documents over few fingerprints (many shared) and random pairs among them
        // (chains and stars), past a batch of `TABLE`, in a shuffled input order.
        let mut random = SplitMix64(27);
        let fingerprints: Vec<u64> = (0..60_000).map(|_| random.next_u64()).collect();
        let mut orders: Vec<i64> = (0..BATCH_ROWS as i64 + 20_000).collect();
        for i in (1..orders.len()).rev() {
            orders.swap(i, random.below(i + 1));
        }
        let documents: Vec<Document> = orders
            .iter()
            .enumerate()
            .map(|(i, &order)| {
                let simhash = fingerprints[random.below(fingerprints.len())];
                (format!("doc-{i}"), simhash, order)
            })
            .collect();
        let edges: Vec<(u64, u64)> = (0..20_000)
            .map(|_| {
                let a = fingerprints[random.below(30_000)];
                let b = fingerprints[random.below(30_000)];
                (a.min(b), a.max(b))
            })
            .filter(|(a, b)| a != b)
            .collect();
        let [(schema, sorted), (joined_schema, joined)] = both_ways(&documents, &edges).await;
        assert_eq!(schema, joined_schema);
        assert!(
            sorted.lines().count() > 50_000,
            "{}",
            sorted.lines().count()
        );
        assert!(sorted == joined, "the tables differ");
        // No members at all: an empty table of the same schema.
        let [(schema, sorted), (joined_schema, joined)] = both_ways(&documents[..1], &[]).await;
        assert_eq!((schema, sorted), (joined_schema, joined));
    }

    #[test]
    fn any_number_of_partitions_fill_the_same_rows() {
        // Groups of 1 to 40 members (more than a partition holds, for some partition counts),
        // members in a shuffled input order: partitions start and end inside groups.
        let mut random = SplitMix64(5);
        let count = 6_000;
        let mut orders: Vec<i64> = (0..count as i64).collect();
        for i in (1..orders.len()).rev() {
            orders.swap(i, random.below(i + 1));
        }
        let mut components = Vec::new();
        while components.len() < count {
            let component = random.next_u64();
            let size = 1 + random.below(40);
            components.extend(std::iter::repeat_n(component, size));
        }
        components.truncate(count);
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("simhash", DataType::UInt64, false),
            Field::new("input_order", DataType::Int64, false),
            Field::new("component", DataType::UInt64, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(
                (0..count).map(|i| format!("d{i}")),
            )),
            Arc::new(UInt64Array::from_iter_values(
                (0..count).map(|_| random.next_u64()),
            )),
            Arc::new(Int64Array::from(orders)),
            Arc::new(UInt64Array::from(components)),
        ];
        let batch = RecordBatch::try_new(schema, columns).unwrap();
        let numbered = |partitions: usize| {
            let pool: Arc<dyn datafusion::execution::memory_pool::MemoryPool> =
                Arc::new(datafusion::execution::memory_pool::UnboundedMemoryPool::default());
            let mut members = Members {
                id_field: batch.schema().field(0).clone(),
                ids: Vec::new(),
                simhashes: Vec::new(),
                keys: Vec::new(),
                reservation: MemoryConsumer::new("test").register(&pool),
            };
            assert!(members.add(&batch.slice(0, 2_500)));
            assert!(members.add(&batch.slice(2_500, count - 2_500)));
            let (schema, batches, _) = members.numbered(partitions).unwrap();
            assert_eq!(batches.len(), partitions);
            let rows = batches.iter().flatten();
            datafusion::arrow::compute::concat_batches(&schema, rows).unwrap()
        };
        let whole = numbered(1);
        assert_eq!(whole.num_rows(), count);
        for partitions in [2, 3, 7, 64, count + 5] {
            assert_eq!(numbered(partitions), whole, "{partitions} partitions");
        }
    }

    #[tokio::test]
    async fn without_memory_for_the_members_the_joins_decide() {
        // Two 3 MB ids, held three times over while sorting, are more than 16 MiB: the members
        // are given up (and sql/05_groups.sql runs); two short ids fit.
        let long = |c: char| c.to_string().repeat(3_000_000);
        let dir = tempfile::tempdir().unwrap();
        let place = Place::Local(dir.path().to_path_buf());
        let documents = [document(&long('a'), 1, 1), document(&long('b'), 1, 0)];
        let (ctx, bindings) = session(&documents, &[], Some(16 << 20), &place);
        let members = Members::collect(&ctx, &bindings).await.unwrap();
        assert!(members.is_none());
        let documents = [document("a", 1, 1), document("b", 1, 0)];
        let (ctx, bindings) = session(&documents, &[], Some(16 << 20), &place);
        let members = Members::collect(&ctx, &bindings).await.unwrap().unwrap();
        assert_eq!(members.keys.len(), 2);
        write(&ctx, &bindings, true).await.unwrap();
        let (_, rows) = groups_table(&ctx).await;
        assert!(
            rows.contains("| a  | 1        | b                 | 2"),
            "{rows}"
        );
    }
}
