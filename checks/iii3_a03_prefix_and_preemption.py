"""III.3.A03 — Prefix sharing and preemption in a block pool.

A block allocator with reference counts (free list, block tables, copy-on-write) runs two scenes on
Llama 3 8B's bf16 KV bytes. First, requests that share a system prompt: blocks with and without
sharing, shared two ways (a content-hash prefix cache, and a fork with copy-on-write), against the
closed form. Then a burst of requests in a pool of fixed size whose outputs grow one token a step:
the step at which the pool runs out, who is preempted (the most recently admitted), and how many
tokens must be recomputed, found by the simulation and by the closed form of the demand.
"""

from collections import deque

import numpy as np

from numbook.check import fact, given, sanity, value
from servebench import ModelConfig, kv_bytes_per_token, kv_cache_bytes

GB, MB = 10**9, 10**6


def row(label, *cells, w=46, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


class BlockAllocator:
    """KV blocks of b token slots with reference counts: a free list, a block table per sequence,
    a prefix cache keyed by the chained hash of full blocks, fork and copy-on-write."""

    def __init__(self, num_blocks, b):
        self.b, self.num_blocks = b, num_blocks
        self.free = list(range(num_blocks - 1, -1, -1))
        self.ref = [0] * num_blocks
        self.tables, self.held = {}, {}
        self.cache = {}              # chained hash of a full block -> block id
        self.copies = 0

    @property
    def used(self):
        return self.num_blocks - len(self.free)

    def _take(self):
        blk = self.free.pop()
        self.ref[blk] = 1
        return blk

    def needs_block(self, seq):
        """Would the next token of `seq` need a block from the free list?"""
        held, table = self.held[seq], self.tables[seq]
        return held % self.b == 0 or self.ref[table[-1]] > 1

    def append(self, seq, tokens=1):
        """Write tokens for `seq` one at a time; copy a shared last block before writing into it."""
        table = self.tables.setdefault(seq, [])
        held = self.held.get(seq, 0)
        for _ in range(tokens):
            if held % self.b == 0:
                table.append(self._take())
            elif self.ref[table[-1]] > 1:                 # copy-on-write
                self.ref[table[-1]] -= 1
                table[-1] = self._take()
                self.copies += 1
            held += 1
        self.held[seq] = held

    def prefill_cached(self, seq, tokens):
        """Admit a prompt: reuse cached full blocks (by the hash of their content and of all before)."""
        table, h, held = [], None, 0
        for start in range(0, len(tokens) - self.b + 1, self.b):
            h = hash((h, tuple(tokens[start:start + self.b])))
            blk = self.cache.get(h)
            if blk is not None and self.ref[blk] > 0:
                self.ref[blk] += 1
            else:
                blk = self._take()
                self.cache[h] = blk
            table.append(blk)
            held += self.b
        self.tables[seq], self.held[seq] = table, held
        self.append(seq, len(tokens) - held)             # the partial last block is the sequence's own

    def fork(self, parent, child):
        self.tables[child] = list(self.tables[parent])
        self.held[child] = self.held[parent]
        for blk in self.tables[child]:
            self.ref[blk] += 1

    def release(self, seq):
        for blk in reversed(self.tables.pop(seq)):
            self.ref[blk] -= 1
            if self.ref[blk] == 0:
                self.free.append(blk)
        del self.held[seq]


# -- the model: Llama 3 8B (only the cache's shape matters) --------------------------------------
layers = fact("llama3_8b_layers", "layers")
d = fact("llama3_8b_hidden", "d", nudge=32)            # a nudge that keeps d a multiple of the heads
heads = fact("llama3_8b_heads", "heads", nudge=-16)    # 32 -> 16 still divides d and is a multiple of 8
kv_heads = fact("llama3_8b_kv_heads", "kv_heads", nudge=8)
max_seq = fact("llama3_8b_context", "max_seq")
cfg = ModelConfig(layers=layers, d_model=d, heads=heads, kv_heads=kv_heads, max_seq=max_seq)
kvpt = value("kv_bytes_per_token", kv_bytes_per_token(cfg, "bf16"))
b = given("b", 16)
block_bytes = value("block_bytes", kv_cache_bytes(cfg, "bf16", slots=1, tokens=b))
value("block_mib", block_bytes / 2**20)

# -- the requests: prompts and outputs, drawn row by row (one more request adds a row) -------------
R = given("n_requests", 32)
p_median = given("prompt_median", 256.0)
o_median = given("output_median", 512.0)
sigma = given("sigma", 1.0)
seed = given("seed", 0, nudge=0)
P = given("system_prompt", 1000)
rng = np.random.default_rng(seed)
z = rng.standard_normal((R, 2))
p = np.clip(np.rint(p_median * np.exp(sigma * z[:, 0])), 1, max_seq - P).astype(int)
o = np.clip(np.rint(o_median * np.exp(sigma * z[:, 1])), 1, max_seq - p - P).astype(int)
value("p_mean", float(p.mean()))
value("o_mean", float(o.mean()))
value("o_max", int(o.max()))
tok_rng = np.random.default_rng(seed + 1)
TOKEN_MAX = np.iinfo(np.int32).max
system = tok_rng.integers(0, TOKEN_MAX, P).tolist()
prompts = [system + tok_rng.integers(0, TOKEN_MAX, int(m)).tolist() for m in p]

# == Sharing: a shared system prompt ===============================================================
q, r = divmod(P, b)
value("prefix_full_blocks", q)
value("prefix_tail", r)
without = int((-(-(P + p) // b)).sum())                       # each request holds its whole prompt
with_closed = q + int((-(-(r + p) // b)).sum())               # full prefix blocks once, the rest each
big = without + R + 1                                         # a pool large enough for scene 1

# route 0: no sharing at all, every prompt in its own blocks
a0 = BlockAllocator(big, b)
for i in range(R):
    a0.append(i, P + int(p[i]))
# route A: a prefix cache keyed by the hash of each full block's tokens (and of all blocks before)
aA = BlockAllocator(big, b)
for i, toks in enumerate(prompts):
    aA.prefill_cached(i, toks)
# route B: prefill the system prompt once, fork every request from it, write its own tokens
aB = BlockAllocator(big, b)
aB.append("system", P)
for i in range(R):
    aB.fork("system", i)
    aB.append(i, int(p[i]))                                   # the first write copies the shared tail
aB.release("system")

blocks_without = value("blocks_without", a0.used)
blocks_with = value("blocks_with", aA.used)
saved = value("blocks_saved", blocks_without - blocks_with)
value("saved_gb", saved * block_bytes / GB)
value("without_gb", blocks_without * block_bytes / GB)
value("with_gb", blocks_with * block_bytes / GB)
value("saved_share", saved / blocks_without)
value("cow_copies", aB.copies)
shared_refs = [aA.ref[blk] for blk in aA.tables[0][:q]]
value("prefix_ref", shared_refs[0] if shared_refs else 0)
sanity("sharing_three_routes", a0.used == without and aA.used == aB.used == with_closed,
       "no sharing = sum ceil((P + p)/b); hash cache = fork with copy-on-write = q + sum ceil((r + p)/b)",
       operands=(aA.used, with_closed))
sanity("saving_closed_form", saved == (R - 1) * q, "the saving is (R - 1) full prefix blocks",
       operands=(saved, (R - 1) * q), relation="equal")
sanity("prefix_refcounts", all(x == R for x in shared_refs) and sum(x > 1 for x in aA.ref) == q,
       "each full prefix block is held once with reference count R, and no other block is shared",
       operands=(shared_refs[0] if shared_refs else R, R), relation=("differs", "not"))
tail_private = not r or all(aA.ref[aA.tables[i][q]] == 1 for i in range(R))
sanity("tail_not_shared", tail_private and aB.copies == (R if r else 0),
       "the partial prefix block is private: the hash cache never shares it, the fork copies it once per request",
       operands=(aB.copies, R if r else 0), relation="not")

print(f"Sharing: {R} requests share a system prompt of {P:,} tokens (blocks of {b})")
row("full prefix blocks, tokens in the partial one", f"{q}", f"{r}")
row("blocks without sharing", f"{blocks_without:,}", f"{blocks_without * block_bytes / GB:.2f} GB")
row("blocks with sharing (hash cache)", f"{aA.used:,}", f"{aA.used * block_bytes / GB:.2f} GB")
row("blocks with sharing (fork + copy-on-write)", f"{aB.used:,}", f"{aB.copies} copies")
row("saved", f"{saved:,}", f"{saved * block_bytes / GB:.2f} GB")

# == The burst: a fixed pool; outputs grow one token a step ================================
def run_burst(pool):
    """The burst in a pool of `pool` blocks, step by step; returns what the scheduler did."""
    alloc = BlockAllocator(pool, b)
    running, waiting = [], deque()
    gen = [0] * R                       # tokens generated so far
    events, preempted, recomputed, first, peak = [], [], 0, None, 0
    for i in range(R):                  # the burst: every prompt is admitted at step 0 if it fits
        if -(-int(p[i]) // b) <= len(alloc.free):
            alloc.append(i, int(p[i]))
            running.append(i)
        else:
            waiting.append(i)
    prompt_blocks, waited = alloc.used, len(waiting)
    step = 0
    while running or waiting:
        step += 1
        # admit from the head of the queue while its tokens and next step's growth fit (servebench's rule)
        while waiting:
            i = waiting[0]
            need = -(-(int(p[i]) + gen[i]) // b)
            growth = sum(alloc.held[j] % b == 0 for j in running) + ((int(p[i]) + gen[i]) % b == 0)
            if need + growth > len(alloc.free):
                break
            waiting.popleft()
            alloc.append(i, int(p[i]) + gen[i])              # recompute: prefill prompt + generated again
            recomputed += int(p[i]) + gen[i]
            events.append((step, "readmit", i, int(p[i]) + gen[i]))
            running.append(i)
        # give every running sequence room for one more token, oldest first; preempt the newest if short
        k, reserved = 0, 0
        while k < len(running):
            i = running[k]
            if alloc.needs_block(i):
                if reserved == len(alloc.free):
                    victim = running.pop()                   # the most recently admitted
                    if first is None:
                        first = (step, victim, alloc.held[victim], len(alloc.tables[victim]), len(running) + 1)
                    events.append((step, "preempt", victim, alloc.held[victim]))
                    preempted.append(victim)
                    alloc.release(victim)
                    waiting.appendleft(victim)
                    continue
                reserved += 1
            k += 1
        for i in running:
            alloc.append(i, 1)
            gen[i] += 1
        peak = max(peak, alloc.used)
        for i in [i for i in running if gen[i] == int(o[i])]:
            alloc.release(i)
            running.remove(i)
        if step > 10 * (int(o.max()) + R):
            raise RuntimeError("the queue cannot drain")
    return dict(prompt_blocks=prompt_blocks, waited=waited, steps=step, events=events, preempted=preempted,
                recomputed=recomputed, first=first, peak=peak, gen=gen, empty=not alloc.tables)


pool = given("pool_blocks", 1024)
value("pool_gib", pool * block_bytes / 2**30)
run = run_burst(pool)
prompt_blocks = value("prompt_blocks", run["prompt_blocks"])
# the same memory as a contiguous cache: each sequence reserves max_seq slots (servebench's KVCache)
contig = value("contig_fits", pool * block_bytes // kv_cache_bytes(cfg, "bf16", slots=1))
sanity("contig_fewer", contig < R, "a contiguous cache of the same bytes holds fewer than the burst",
       operands=(contig, R), relation="smaller")
sanity("all_admitted", run["waited"] == 0, "the pool holds every prompt at step 0", operands=(prompt_blocks, pool))
events, preempted, recomputed, step, peak, gen, first = (
    run[k] for k in ("events", "preempted", "recomputed", "steps", "peak", "gen", "first"))

t_star, victim, held_v, blocks_v, running_at = first
value("first_preempt_step", t_star)
value("victim", victim)
value("victim_prompt", int(p[victim]))
value("victim_generated", held_v - int(p[victim]))
value("recompute_tokens", held_v)
value("running_at_preempt", running_at)
value("victim_blocks", blocks_v)
value("swap_mb", blocks_v * block_bytes / MB)
value("preemptions", len(preempted))
value("preempted_requests", len(set(preempted)))
value("recomputed_total", recomputed)
value("steps", step)
value("peak_blocks", peak)
gen_total = value("generated_total", int(sum(gen)))
value("recompute_share", recomputed / gen_total)
value("prompt_share", prompt_blocks / pool)

# the closed form: demand at step t is sum over requests still generating of ceil((p + t) / b)
t = np.arange(1, int(o.max()) + 1)
live = o[None, :] >= t[:, None]
demand = np.where(live, -(-(p[None, :] + t[:, None]) // b), 0).sum(axis=1)
t_closed = int(t[np.argmax(demand > pool)])
alive = np.nonzero(o >= t_closed)[0]                          # in admission order
dem_t = -(-(p + t_closed) // b)
keep = len(alive)
while dem_t[alive[:keep]].sum() > pool:                       # drop the newest until the rest fit
    keep -= 1
victims_closed = alive[keep:][::-1].tolist()
value("demand_at_preempt", int(demand[t_closed - 1]))
value("demand_before", int(demand[t_closed - 2]))
value("step_before", t_closed - 1)
again = [e for e in events if e[2] == victim][1:3]            # the victim's readmission and what followed
value("victim_readmit_step", again[0][0] if again else 0)
value("victim_next_preempt", again[1][0] if len(again) > 1 and again[1][1] == "preempt" else 0)
sanity("first_step_two_routes", t_star == t_closed and demand[:t_closed - 1].max() <= pool < demand[t_closed - 1],
       "the simulation preempts first at the first step whose demand exceeds the pool",
       operands=(t_star, t_closed), relation="larger")
first_victims = [e[2] for e in events if e[0] == t_star and e[1] == "preempt"]
sanity("victims_two_routes", first_victims == victims_closed,
       "the simulation's victims are the newest requests the closed form must drop",
       operands=(first_victims, victims_closed), relation="falls")
sanity("victim_is_newest", victim == max(i for i in range(R) if o[i] >= t_star) and victim == alive[-1],
       "the victim is the most recently admitted request still generating", operands=(victim, int(alive[-1])))
sanity("recompute_is_held", held_v == int(p[victim]) + t_star - 1,
       "the victim recomputes its prompt and the tokens it generated before the step",
       operands=(held_v, int(p[victim]) + t_star - 1))
sanity("never_over", peak <= pool, "the pool never holds more blocks than it has", operands=(peak, pool),
       relation="not")
sanity("every_output_done", gen == o.tolist() and run["empty"],
       "every request generates exactly its output and the pool ends empty")
sanity("swap_is_blocks", blocks_v == -(-held_v // b), "the victim holds ceil(tokens / b) blocks",
       operands=(blocks_v, -(-held_v // b)))

print(f"\nBurst: {R} requests in a pool of {pool:,} blocks ({pool * block_bytes / 2**30:.2f} GiB)")
row("blocks of the prompts at step 0", f"{prompt_blocks:,}")
row("requests a contiguous cache of these bytes holds", f"{contig}")
row("first step short of a block (simulated)", f"{t_star:,}")
row("first step with demand > pool (closed form)", f"{t_closed:,}", f"{int(demand[t_closed - 1]):,} blocks")
row("running at that step", f"{running_at}")
row("victim (newest admitted), its prompt", f"request {victim}", f"{int(p[victim]):,} tok")
row("tokens it must recompute", f"{held_v:,}", f"{blocks_v} blocks")
row("or swap out and back, each way", f"{blocks_v * block_bytes / MB:,.1f} MB")
row("preemptions in the whole run", f"{len(preempted)}", f"{len(set(preempted))} requests")
row("tokens recomputed in the whole run", f"{recomputed:,}")
row("decode steps until the burst drains", f"{step:,}")
print("\nEvents (step, what, request, tokens held or recomputed)")
for e in events[:12]:
    row(f"  step {e[0]:,}", e[1], f"request {e[2]}", f"{e[3]:,}", w=14, cw=14)
if len(events) > 12:
    print(f"  ... {len(events) - 12} more")

# -- Variation: the smallest pool that never preempts ---------------------------------------------
need_max = int(demand.max())                                   # the closed form: the peak of the demand
value("pool_no_preempt", need_max)
value("pool_no_preempt_gib", need_max * block_bytes / 2**30)
value("peak_demand_step", int(t[np.argmax(demand)]))
value("pool_no_preempt_over", need_max / pool)
fits = run_burst(need_max)
short = run_burst(need_max - 1)
sanity("no_preempt_two_routes", not fits["preempted"] and fits["empty"] and len(short["preempted"]) > 0,
       "the simulation never preempts in a pool of max D(t) blocks, and does in one block less",
       operands=(len(fits["preempted"]), len(short["preempted"])), relation=("not", "smaller"))
print(f"\nVariation: the demand peaks at {need_max:,} blocks; that pool runs the burst with"
      f" {len(fits['preempted'])} preemptions, one block less with {len(short['preempted'])}")
