"""Scale: what a book of ten thousand problems would cost, from what the scale test measured.

Reads the record `nox -s scale -- --json checks/scale_record.json` wrote (generated books of 100, 500 and 1,000
problems and this book, built, served, searched and sharded on one machine, in one run) and this book's recorded
check weights (checks/runtimes.json), and extrapolates: the warm build by a straight line through the three
generated books; the search index in proportion to the pages, and its first load in the browser in proportion to
the index's bytes, at the seconds a megabyte measured on each kind of page; the cold check work in proportion to
the problems, spread over a matrix of CI runners dealt longest first, then the site job's warm build.
"""

import json
import re
import statistics
from pathlib import Path

from numbook.check import given, sanity, value

HERE = Path(__file__).parent
record = json.loads((HERE / "scale_record.json").read_text(encoding="utf-8"))
rows, big = record["rows"], record["largest"]
book, machine = big["this_book"], big["machine"]
# the problems' checks (named by their problem's ID, as checks/i1_a01_….py): not the lessons', the deep dives' or this
PROBLEM_CHECK = re.compile(r"checks/[ivx]+\d+_[a-z]\d\d_")
weights = {name: w for name, w in json.loads((HERE / "runtimes.json").read_text(encoding="utf-8"))["seconds"].items()
           if PROBLEM_CHECK.match(name)}

problems = given("problems", 10_000)
runners = given("runners", 16)               # a CI matrix of 16 jobs
runner_cores = given("runner_cores", 4)      # GitHub's ubuntu-latest runner, public repository (2 for a private one)
setup_s = given("setup_s", 180, unit="s")    # an assumption: checkout, Python, the book's packages, the cache restored


def span(xs: list[float]) -> str:
    return f"{min(xs):.2f}–{max(xs):.2f}"


print(f"measured on {machine['date']} in one run of the scale test: {machine['cpu']}, {machine['cores']} cores; "
      f"each warm build the median of {len(rows[0]['build_warm_runs'])} (range in brackets)")
print(f"{'problems':>9} {'pages':>6} {'warm build, s':>20} {'per page':>9} {'search index':>13} {'per page':>9}")
sizes: list[int] = []
pages, warm = [], []
for r in rows:
    n = r["problems"]
    value(f"n_{n}", n, fixed="a size the scale test was run at (tools/scale_book.py --sizes): a setting, not a result")
    p = given(f"pages_{n}", r["pages"])
    w = given(f"warm_s_{n}", r["build_warm_s"], unit="s")
    sizes.append(n)
    pages.append(p)
    warm.append(w)
    print(f"{n:>9,} {p:>6,} {w:>6.1f} ({span(r['build_warm_runs']):>11}) {1000 * w / p:>6.0f} ms "
          f"{r['search_bytes'] / 1e6:>10.2f} MB {r['search_bytes'] / p / 1e3:>6.2f} kB")
step_low = value("step_ms_low", 1000 * (warm[1] - warm[0]) / (pages[1] - pages[0]), unit="ms")
step_high = value("step_ms_high", 1000 * (warm[2] - warm[1]) / (pages[2] - pages[1]), unit="ms")
print(f"each page added costs {step_low:.1f} ms from {sizes[0]:,} to {sizes[1]:,} problems and {step_high:.1f} ms "
      f"from {sizes[1]:,} to {sizes[2]:,}")
sanity("build_is_linear", step_high <= 1.2 * step_low,
       "a page added to the larger book costs at most 1.2 times what one added to the smaller costs",
       operands=(step_high, 1.2 * step_low), relation="at most")

# the warm build: a straight line through the three generated books (least squares)
slope, fixed_s = statistics.linear_regression(pages, warm)
pages_10k = value("pages_10k", round(problems * pages[-1] / sizes[-1]))   # ten problems and an overview a chapter
warm_10k = value("warm_10k_min", (fixed_s + slope * pages_10k) / 60, unit="min")
book_pages = given("book_pages", book["pages"])
book_warm = given("book_warm_s", book["build_warm_s"], unit="s")
book_ms = value("book_ms_per_page", 1000 * book_warm / book_pages, unit="ms")
warm_10k_book = value("warm_10k_like_book_min", book_ms * pages_10k / 1000 / 60, unit="min")
print(f"\nwarm build of {problems:,} problems ({pages_10k:,} pages as generated): {warm_10k:.1f} min for pages like "
      f"the generated ones, {warm_10k_book:.1f} min for pages like this book's ({book_ms:.0f} ms a page over its "
      f"{book_pages} pages, median of {len(book['build_warm_runs'])}: {span(book['build_warm_runs'])} s)")

# search: the index grows with the pages; its first load with the index's bytes, at each kind of page's own rate
gen_mb = given("index_mb_1000", rows[-1]["search_bytes"] / 1e6, unit="MB")
gen_s = given("search_load_s_1000", statistics.median(big["search_load_s"]), unit="s")
book_mb = given("book_index_mb", book["search_bytes"] / 1e6, unit="MB")
book_s = given("book_search_load_s", statistics.median(book["search_load_s"]), unit="s")
gen_rate = gen_s / gen_mb   # seconds a megabyte of index, on each kind of page
book_rate = book_s / book_mb
gen_kb = 1000 * gen_mb / pages[-1]        # kB of index a page
book_kb = 1000 * book_mb / book_pages
load_10k = value("search_10k_s", gen_kb * pages_10k / 1000 * gen_rate, unit="s")
load_10k_book = value("search_10k_book_s", book_kb * pages_10k / 1000 * book_rate, unit="s")
pages_1s = value("pages_search_1s", round(1000 / (gen_kb * gen_rate)))
pages_1s_book = value("pages_search_1s_book", round(1000 / (book_kb * book_rate)))
print(f"first search (open to first result, Chromium, median of {len(big['search_load_s'])}): {gen_s:.2f} s "
      f"({span(big['search_load_s'])}) for the {gen_mb:.2f} MB index of {sizes[-1]:,} generated problems, "
      f"{book_s:.2f} s ({span(book['search_load_s'])}) for this book's {book_mb:.2f} MB")
print(f"search index: {gen_kb:.2f} kB a page generated, {book_kb:.1f} kB on this book's pages; at {pages_10k:,} pages "
      f"a first search takes {load_10k:.0f} s ({load_10k_book:.0f} s); one second is reached at {pages_1s:,} pages "
      f"({pages_1s_book:,})")
sanity("search_outgrows_a_second", load_10k > 1 and load_10k_book > load_10k,
       "at ten thousand problems the browser's first search takes longer than a second, on this book's pages longer "
       "still", operands=(load_10k, 1), relation="larger")

# cold: every check runs. A check's weight is core-seconds: its run time times the cores it holds (4 for one that
# runs alone, N for a process group of N), as checks/runtimes.json records them.
per_check = given("core_s_per_check", statistics.fmean(weights.values()), unit="s")
heaviest = max(weights.values())   # the bound it sets is printed; the measured balance is the larger here
core_h = value("cold_core_h", per_check * problems / 3600, unit="h")
# longest first: the slowest shard is at most the mean plus the heaviest check; the generated book's was measured
measured_ratio = given("shard_ratio", big["shard_ratio"])
mean_load = per_check * problems / runners
balance = value("balance", max(measured_ratio, 1 + heaviest / mean_load))
work_min = mean_load * balance / runner_cores / 60
setup_min = value("setup_min", setup_s / 60, unit="min")
shards_h = value("shards_h", (setup_min + work_min) / 60, unit="h")
site_min = value("site_min", setup_min + warm_10k_book, unit="min")
print(f"\ncold, every check run: {per_check:.0f} core-s a problem (mean weight of this book's {len(weights)} problem "
      f"checks; heaviest {heaviest:.0f}), {core_h:,.0f} core-hours for {problems:,} problems")
print(f"over {runners} runners of {runner_cores} cores, the slowest shard at most {balance:.3f}x the mean: the checks "
      f"take {shards_h:.1f} h with an empty cache; then the site job ({site_min:.0f} min: {setup_min:.0f} setting "
      f"up, the warm build of pages like this book's)")
for hit in (0.9, 0.99):
    h = given(f"hit_{round(hit * 100)}", hit)
    m = value(f"shards_min_hit_{round(hit * 100)}", setup_min + (1 - h) * work_min, unit="min")
    print(f"  with {h:.0%} of the results restored by actions/cache: checks {m:.1f} min, then the site job")
crossover = value("hit_crossover", 1 - warm_10k_book / work_min)
print(f"from a hit rate of {crossover:.1%} the site job's warm build takes longer than the checks left to run")
above = min(1.0, crossover + 0.01)
sanity("build_outlasts_checks", warm_10k_book > (1 - above) * work_min and warm_10k_book < (1 - 0.5) * work_min,
       "just above the crossover hit rate the warm build takes longer than the checks left to run (and at half the "
       "results restored it does not)", operands=(warm_10k_book, (1 - above) * work_min), relation="larger")
