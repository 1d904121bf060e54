"""Scale: what a book of ten thousand problems would cost, from what the scale test measured.

Reads the record `nox -s scale -- --json checks/scale_record.json` wrote (generated books of 100, 500 and 1,000
problems and this book, built, served, searched and sharded on one machine) and this book's recorded check run
times (checks/runtimes.json), and extrapolates: the warm build by a straight line through the three generated
books, the search index and its first load in proportion to the pages, the cold check work in proportion to the
problems, spread over a matrix of CI runners with its measured shard balance and the result cache's hit rate.
"""

import json
import statistics
from pathlib import Path

from numbook.check import given, sanity, value

HERE = Path(__file__).parent
record = json.loads((HERE / "scale_record.json").read_text(encoding="utf-8"))
rows, big, book = record["rows"], record["largest"], record["largest"]["this_book"]
machine = record["largest"]["machine"]
times = {name: t for name, t in json.loads((HERE / "runtimes.json").read_text(encoding="utf-8"))["seconds"].items()
         if name != "checks/scale_estimate.py"}   # the book's checks: not this one, which only reads records

problems = given("problems", 10_000)
runners = given("runners", 16)                 # a CI matrix of 16 jobs
runner_cores = given("runner_cores", 4)        # GitHub's ubuntu-latest runner: 4 cores
setup_s = given("setup_s", 180, unit="s")      # an assumption, not measured here: checkout, Python, the book's packages

print(f"measured on {machine['date']}: {machine['cpu']}, {machine['cores']} cores")
print(f"{'problems':>9} {'pages':>6} {'warm build':>11} {'per page':>9} {'search index':>13} {'per page':>9}")
sizes: list[int] = []
pages, warm = [], []
for r in rows:
    n = r["problems"]
    value(f"n_{n}", n, fixed="a size the scale test was run at (tools/scale_book.py --sizes): a setting, not a result")
    p = given(f"pages_{r['problems']}", r["pages"])
    w = given(f"warm_s_{r['problems']}", r["build_warm_s"], unit="s")
    sizes.append(n)
    pages.append(p)
    warm.append(w)
    print(f"{n:>9,} {p:>6,} {w:>9.1f} s {1000 * w / p:>6.0f} ms {r['search_bytes'] / 1e6:>10.2f} MB "
          f"{r['search_bytes'] / p / 1e3:>6.2f} kB")
value("per_page_ms_small", 1000 * warm[0] / pages[0], unit="ms")
value("per_page_ms_large", 1000 * warm[-1] / pages[-1], unit="ms")
value("per_page_ratio", (warm[-1] / pages[-1]) / (warm[0] / pages[0]))
step_low = value("step_ms_low", 1000 * (warm[1] - warm[0]) / (pages[1] - pages[0]), unit="ms")
step_high = value("step_ms_high", 1000 * (warm[2] - warm[1]) / (pages[2] - pages[1]), unit="ms")
print(f"each page added costs {step_low:.1f} ms from {sizes[0]:,} to {sizes[1]:,} problems and {step_high:.1f} ms "
      f"from {sizes[1]:,} to {sizes[2]:,}")
sanity("build_is_linear", step_high <= 1.2 * step_low,
       "the warm build's cost of an added page does not grow with the book (within 20 %)",
       operands=(step_high, 1.2 * step_low), relation="does not grow")

# a straight line through the three generated books, least squares
slope, fixed_s = statistics.linear_regression(pages, warm)
pages_10k = value("pages_10k", round(problems * pages[-1] / sizes[-1]))
warm_10k = value("warm_10k_min", (fixed_s + slope * pages_10k) / 60, unit="min")
book_pages = given("book_pages", book["pages"])
book_warm = given("book_warm_s", book["build_warm_s"], unit="s")
book_ms = value("book_ms_per_page", 1000 * book_warm / book_pages, unit="ms")
warm_10k_like_book = value("warm_10k_like_book_min", book_ms * pages_10k / 1000 / 60, unit="min")
print(f"\nwarm build of {problems:,} problems ({pages_10k:,} pages): {warm_10k:.1f} min for pages like the generated "
      f"ones, {warm_10k_like_book:.0f} min for pages like this book's ({book_ms:.0f} ms a page, {book_pages} pages)")

# search: the index grows with the pages; its first load in the browser with the bytes
index_mb = given("index_mb_1000", rows[-1]["search_bytes"] / 1e6, unit="MB")
load_s = given("search_load_s_1000", statistics.median(big["search_load_s"]), unit="s")
per_mb = value("search_s_per_mb", load_s / index_mb, unit="s")
gen_kb = value("index_kb_per_page", 1000 * index_mb / pages[-1], unit="kB")
book_kb = value("book_index_kb_per_page", book["search_bytes"] / book_pages / 1e3, unit="kB")
index_10k = value("index_10k_mb", gen_kb * pages_10k / 1000, unit="MB")
index_10k_book = value("index_10k_book_mb", book_kb * pages_10k / 1000, unit="MB")
load_10k = value("search_10k_s", index_10k * per_mb, unit="s")
load_10k_book = value("search_10k_book_s", index_10k_book * per_mb, unit="s")
pages_1s = value("pages_search_1s", round(1000 / (gen_kb * per_mb)))
pages_1s_book = value("pages_search_1s_book", round(1000 / (book_kb * per_mb)))
print(f"search index: {gen_kb:.2f} kB a page here ({book_kb:.1f} kB on this book's pages); at {pages_10k:,} pages "
      f"{index_10k:.0f} MB ({index_10k_book:.0f} MB), first search {load_10k:.0f} s ({load_10k_book:.0f} s) at "
      f"{per_mb:.2f} s a MB; one second is reached at {pages_1s:,} pages ({pages_1s_book:,})")
sanity("search_outgrows_a_second", load_10k > 1 and load_10k_book > load_10k,
       "at ten thousand problems the browser's first search takes longer than a second, on this book's pages longer "
       "still", operands=(load_10k, 1), relation="larger")

# cold: every check runs; this book's checks, as recorded, in core-seconds of a 4-core runner
per_check = given("core_s_per_check", statistics.fmean(times.values()), unit="s")
n_checks = len(times)
core_h = value("cold_core_h", per_check * problems / 3600, unit="h")
balance = given("shard_ratio", big["shard_ratio"])
work_min = per_check * problems / (runners * runner_cores) * balance / 60
setup_min = value("setup_min", setup_s / 60, unit="min")
cold_min = value("cold_16_min", setup_min + work_min, unit="min")
value("cold_16_h", cold_min / 60, unit="h")
print(f"\ncold, every check run: {per_check:.0f} core-s a check (mean of this book's {n_checks} recorded checks), "
      f"{core_h:,.0f} core-hours for {problems:,} problems")
print(f"over {runners} runners of {runner_cores} cores, slowest shard {balance:.2f}x the mean: {cold_min:.0f} min a "
      f"run with an empty cache (of it {setup_min:.0f} min setting up)")
for hit in (0.9, 0.99):
    h = given(f"hit_{round(hit * 100)}", hit)
    m = value(f"cold_16_min_hit_{round(hit * 100)}", setup_min + (1 - h) * work_min, unit="min")
    print(f"  with {h:.0%} of the results restored by actions/cache: {m:.0f} min")
