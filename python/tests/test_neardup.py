"""The wheel against the CLI built from the same tree (NEARDUP_BIN), on the shipped sample.

The oracles are independent of the bindings: the pinned fingerprints in
fixtures/golden_fingerprints.json, the CLI's own outputs read with pyarrow, and brute-force
Hamming distances computed here in Python.
"""

import importlib.metadata
import json
import os
import pathlib
import subprocess
import random
import signal
import sys
import threading
import time

import datafusion
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "fixtures" / "sample.parquet"
GOLDEN = json.loads((ROOT / "fixtures" / "golden_fingerprints.json").read_text("utf-8"))
TABLES = ["signatures", "pairs", "groups", "dedup"]


def neardup_cli(*args):
    binary = os.environ.get("NEARDUP_BIN")
    if not binary:
        pytest.fail("NEARDUP_BIN must name the CLI built from this tree (python/run-tests sets it)")
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="session")
def cli_out(tmp_path_factory):
    """The CLI's run of the sample at k = 3."""
    out = tmp_path_factory.mktemp("cli") / "out"
    done = neardup_cli("run", "--input", SAMPLE, "--output", out, "--k", "3", "--quiet")
    assert done.returncode == 0, done.stderr
    return out


def table_rows(folder):
    """A table's rows as sorted tuples, read with pyarrow alone."""
    table = pq.read_table(folder)
    return sorted(zip(*(table.column(name).to_pylist() for name in table.column_names)))


def context():
    ctx = datafusion.SessionContext()
    neardup.register(ctx)
    return ctx


def sql_column(ctx, sql):
    table = ctx.sql(sql).to_arrow_table()
    return table.column(0).to_pylist()


def test_the_wheel_pins_datafusion_to_the_major_version_of_its_ffi():
    requires = importlib.metadata.requires("neardup")
    pins = [r for r in requires if r.startswith("datafusion")]
    assert pins and "<56" in pins[0] and ">=55" in pins[0], requires
    assert datafusion.__version__.split(".")[0] == "55"


def test_every_function_is_registered_in_datafusion_python():
    names = set(neardup.functions())
    for expected in ["simhash", "simhash_details", "clean_text", "hamming", "bucket",
                     "band_key", "band_pairs"]:
        assert expected in names
    ctx = context()
    for name in names:
        # The context lists every function registered in it, ours through the FFI too.
        plan = ctx.sql(f"SELECT count(*) FROM information_schema.routines "
                       f"WHERE routine_name = '{name}'")
        assert plan.to_arrow_table().column(0)[0].as_py() >= 1, name


def test_the_readme_example_queries_a_file_by_path(cli_out):
    ctx = datafusion.SessionContext().enable_url_table()
    neardup.register(ctx)
    got = ctx.sql(f"SELECT id, simhash(text, 'mode=auto') AS h FROM '{SAMPLE}'").to_arrow_table()
    texts = pq.read_table(SAMPLE, columns=["id", "text"])
    expected = neardup.fingerprint(texts.column("text").to_pylist(), features="mode=auto")
    assert dict(zip(got.column("id").to_pylist(), got.column("h").to_pylist())) == dict(
        zip(texts.column("id").to_pylist(), expected.to_pylist()))


@pytest.mark.parametrize("row", GOLDEN["fingerprints"], ids=lambda r: r["features"] or "defaults")
def test_sql_in_datafusion_python_gives_the_pinned_fingerprints(row):
    en, zh = GOLDEN["texts"]["en"], GOLDEN["texts"]["zh"]
    ctx = context()
    # Literals, as a user writes them...
    got = sql_column(ctx, f"SELECT simhash('{en}', '{row['features']}') UNION ALL "
                          f"SELECT simhash('{zh}', '{row['features']}')")
    assert sorted(got) == sorted([row["en"], row["zh"]])
    # ...and a column of a table, in one batch with a NULL.
    ctx.from_arrow(pa.table({"n": [1, 2, 3], "t": [en, None, zh]}), name="texts")
    got = sql_column(ctx, f"SELECT simhash(t, '{row['features']}') FROM texts ORDER BY n")
    assert got == [row["en"], None, row["zh"]]


@pytest.mark.parametrize("row", GOLDEN["fingerprints"], ids=lambda r: r["features"] or "defaults")
def test_fingerprint_gives_the_pinned_fingerprints_without_files(row):
    texts = [GOLDEN["texts"]["en"], None, GOLDEN["texts"]["zh"]]
    got = neardup.fingerprint(texts, features=row["features"])
    assert isinstance(got, pa.UInt64Array)
    assert got.to_pylist() == [row["en"], None, row["zh"]]


def test_the_functions_in_datafusion_python_give_the_cli_signatures_of_the_sample(cli_out):
    summary = json.loads((cli_out / "summary.json").read_text("utf-8"))
    features = summary["parameters"]["features"]
    ctx = context()
    ctx.register_parquet("sample", str(SAMPLE))
    got = ctx.sql(f"SELECT id, simhash(text, '{features}') AS h FROM sample").to_arrow_table()
    by_id = {i: h for i, h in zip(got.column("id").to_pylist(), got.column("h").to_pylist())}
    cli = pq.read_table(cli_out / "signatures", columns=["id", "simhash"])
    expected = dict(zip(cli.column("id").to_pylist(), cli.column("simhash").to_pylist()))
    assert expected and {i: by_id[i] for i in expected} == expected
    # Documents the CLI had nothing to fingerprint (NULL, empty, punctuation) get NULL here.
    assert all(by_id[i] is None for i in by_id if i not in expected)
    # The same through neardup.fingerprint, in the sample's order.
    texts = pq.read_table(SAMPLE, columns=["id", "text"])
    prints = neardup.fingerprint(texts.column("text").to_pylist(), features=features)
    assert dict(zip(texts.column("id").to_pylist(), prints.to_pylist())) == by_id


def popcount(value):
    return bin(value).count("1")


def test_hamming_band_key_and_band_pairs_find_every_pair_brute_force_finds(cli_out):
    """The candidate step of the CLI's scan matching, in datafusion-python, against all pairs."""
    ctx = context()
    ctx.register_parquet("signatures", str(cli_out / "signatures"))
    prints = sorted(set(sql_column(ctx, "SELECT simhash FROM signatures WHERE simhash IS NOT NULL")))
    k = 3
    brute = {(a, b) for i, a in enumerate(prints) for b in prints[i + 1:]
             if popcount(a ^ b) <= k}
    assert brute, "the sample has near-duplicate fingerprints"
    pairs = ctx.sql(f"""
        SELECT pair['simhash_a'] AS a, pair['simhash_b'] AS b,
               hamming(pair['simhash_a'], pair['simhash_b']) AS distance
        FROM (SELECT unnest(pairs) AS pair FROM (
            SELECT band_pairs(simhash, band, {k}, 'bands:4') AS pairs
            FROM (SELECT DISTINCT simhash, unnest(range(1, 5)) AS band FROM signatures
                  WHERE simhash IS NOT NULL)
            GROUP BY band, band_key(simhash, band, 'bands:4') % arrow_cast(16, 'UInt64')))
    """).to_arrow_table().to_pylist()
    assert {(p["a"], p["b"]) for p in pairs} == brute
    assert len(pairs) == len(brute), "each pair once"
    assert all(p["distance"] == popcount(p["a"] ^ p["b"]) for p in pairs)
    buckets = ctx.sql("SELECT simhash, bucket(simhash, 1) AS b FROM signatures "
                      "WHERE simhash IS NOT NULL").to_arrow_table()
    for h, b in zip(buckets.column("simhash").to_pylist(), buckets.column("b").to_pylist()):
        assert b == h >> 48, "bucket 1 is the top 16 bits"


def test_clean_text_and_simhash_details_match_the_cli(cli_out):
    ctx = context()
    ctx.register_parquet("sample", str(SAMPLE))
    cleaned = sql_column(ctx, "SELECT clean_text('<p>Ｆｕｌｌ&amp;Width  TEXT</p>')")
    done = neardup_cli("query", "--format", "json",
                       "SELECT clean_text('<p>Ｆｕｌｌ&amp;Width  TEXT</p>') AS c")
    assert done.returncode == 0, done.stderr
    assert cleaned == [json.loads(done.stdout)[0]["c"]]
    details = ctx.sql("SELECT id, simhash_details(text) AS d FROM sample "
                      "WHERE id = 1").to_arrow_table().column("d").to_pylist()[0]
    assert details["simhash"] == neardup.fingerprint(
        pq.read_table(SAMPLE).filter(pa.compute.equal(pa.compute.field("id"), 1))
        .column("text").to_pylist())[0].as_py()
    assert details["features"] > 10


def test_run_from_python_equals_the_cli_run_row_for_row(cli_out, tmp_path):
    out = tmp_path / "out"
    summary = neardup.run(input=SAMPLE, output=out, k=3, quiet=True)
    cli_summary = json.loads((cli_out / "summary.json").read_text("utf-8"))
    assert summary == json.loads((out / "summary.json").read_text("utf-8"))
    assert summary["counts"] == cli_summary["counts"]
    assert summary["parameters"] == cli_summary["parameters"]
    assert summary["counts"]["groups"] == 4
    for table in TABLES:
        assert table_rows(out / table) == table_rows(cli_out / table), table
    # read() gives the same tables as pyarrow reads from the folders.
    for table in TABLES:
        got = neardup.read(out, table=table)
        assert sorted(zip(*(c.to_pylist() for c in got.columns))) == table_rows(out / table)
    corpus = neardup.read(out, table="corpus")
    assert corpus.num_rows == pq.read_metadata(SAMPLE).num_rows


def test_keywords_are_the_cli_flags(tmp_path):
    out = tmp_path / "out"
    summary = neardup.run(input=[SAMPLE], output=str(out), k=5, verify="off",
                          features={"mode": "words"}, keep="longest", quiet=True)
    p = summary["parameters"]
    assert (p["k"], p["keep"], p.get("min_similarity")) == (5, "longest", None)
    assert "mode=words" in p["features"]
    again = neardup.run(input=SAMPLE, output=out, overwrite=True, quiet=True)
    assert again["parameters"]["k"] == 7, "the default k"
    assert again["parameters"]["min_similarity"] == 0.75, "the default verification"


def test_query_runs_sql_over_an_output(cli_out):
    got = neardup.query("SELECT count(*) AS n FROM groups g JOIN dedup d "
                        "ON g.representative_id = d.id", data=cli_out)
    # Every group's representative is what dedup kept of it.
    groups = pq.read_table(cli_out / "groups")
    assert got.column("n")[0].as_py() == groups.num_rows > 0


def test_a_copy_replaces_a_file_only_when_told_and_never_a_table_it_reads(cli_out, tmp_path):
    mine = tmp_path / "mine.csv"
    mine.write_text("precious")
    copy = f"COPY (SELECT 1 AS one) TO '{mine}'"
    with pytest.raises(neardup.UsageError, match="pass --overwrite"):
        neardup.query(copy)
    assert mine.read_text() == "precious"
    neardup.query(copy, overwrite=True)
    assert mine.read_text() == "one\n1\n"
    before = sorted(p.name for p in (cli_out / "groups").iterdir())
    with pytest.raises(neardup.UsageError, match="would write into --data's"):
        neardup.query(f"COPY (SELECT * FROM groups) TO '{cli_out / 'groups' / 'x.parquet'}'",
                      data=cli_out, overwrite=True)
    assert sorted(p.name for p in (cli_out / "groups").iterdir()) == before


def test_bad_input_raises_the_cli_message_and_writes_nothing(tmp_path):
    missing = tmp_path / "missing.parquet"
    out = tmp_path / "out"
    done = neardup_cli("run", "--input", missing, "--output", out, "--quiet")
    assert done.returncode == 1
    with pytest.raises(neardup.NeardupError) as error:
        neardup.run(input=missing, output=out, quiet=True)
    assert f"neardup: error: {error.value}" == done.stderr.strip().splitlines()[-1]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if "staging" in p.name]


def test_options_that_cannot_work_raise_a_usage_error(tmp_path):
    with pytest.raises(neardup.UsageError, match="--no-such-flag"):
        neardup.run(input=SAMPLE, output=tmp_path / "a", no_such_flag=3)
    with pytest.raises(neardup.UsageError, match="keep"):
        neardup.run(input=SAMPLE, output=tmp_path / "b", keep="tallest")
    with pytest.raises(neardup.UsageError):
        neardup.fingerprint(["text"], features="mode=nonsense")
    with pytest.raises(neardup.UsageError, match="no table"):
        neardup.read(tmp_path, table="corpus; DROP")
    assert not list(tmp_path.iterdir())
    with pytest.raises(Exception, match="mode"):
        context().sql("SELECT simhash('text', 'mode=nonsense')").to_arrow_table()


def test_the_job_releases_the_gil_while_it_runs(tmp_path):
    """Another Python thread keeps running while the job does."""
    outcome = {}

    def job():
        outcome["summary"] = neardup.run(input=SAMPLE, output=tmp_path / "out", quiet=True)

    ticks = 0
    worker = threading.Thread(target=job)
    worker.start()
    while worker.is_alive():
        ticks += 1
    worker.join()
    assert outcome["summary"]["counts"]["groups"] >= 1
    # With the GIL held for the whole job this loop would run a handful of times at most.
    assert ticks > 1000, ticks


def test_ctrl_c_stops_the_job_and_leaves_nothing_behind(tmp_path):
    """SIGINT in the middle of a run: KeyboardInterrupt, no output, no staging folder."""
    rng = random.Random(7)
    words = [f"w{n}" for n in range(5000)]
    texts = [" ".join(rng.choices(words, k=120)) for _ in range(150_000)]
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"id": list(range(len(texts))), "text": texts}), corpus,
                   row_group_size=10_000)
    out = tmp_path / "out"
    # Python leaves SIGINT ignored when it starts with it ignored (a job a non-interactive shell
    # put in the background): the child sets Python's own handler, whoever started the tests.
    script = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
              f"import neardup; neardup.run(input={str(corpus)!r}, output={str(out)!r}, "
              f"quiet=True)")
    job = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    staging = []
    while not staging and job.poll() is None and time.monotonic() < deadline:
        staging = [p for p in tmp_path.iterdir() if "neardup-staging" in p.name]
        time.sleep(0.02)
    assert staging, "the run made no staging folder before it ended"
    time.sleep(0.3)
    job.send_signal(signal.SIGINT)
    _, stderr = job.communicate(timeout=60)
    assert job.returncode != 0 and "KeyboardInterrupt" in stderr, stderr
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if "neardup-staging" in p.name]
