"""II.1.A02 — Activation memory of one transformer block, counted on autograd against Korthikanti et al. (2022).

Builds one GPT-2 block (LayerNorm, fused QKV, causal attention with softmax and dropout, output
projection, dropout, LayerNorm, a 4h GeLU MLP, dropout) in bf16, runs its forward pass under
torch.autograd.graph.saved_tensors_hooks and records every tensor autograd saves for the backward
pass, with the operation that saved it. Tensors that share storage (views, a fused QKV output split
three ways) are counted once, by their storage; parameters are left out. The count is set against
sbh(34 + 5as/h), term by term, on three attention paths: F.dropout as it runs on the CPU, the fused
torch.native_dropout that F.dropout calls on a GPU, and F.scaled_dot_product_attention.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from numbook.check import fact, given, sanity, value

torch.set_num_threads(1)
MB = 10**6
TAG = ["?"]
MASKS = []
QKV_STORAGES = set()
SCORE = [0]


def tag(name):
    TAG[0] = name


class GPT2Block(nn.Module):
    """One GPT-2 layer. ``dropout`` is "cpu" (F.dropout as the CPU runs it), "fused" (torch.native_dropout,
    which F.dropout calls on a GPU) or "none"; ``sdpa`` uses F.scaled_dot_product_attention."""

    def __init__(self, h, a, p, dropout="fused", sdpa=False):
        super().__init__()
        self.a, self.p, self.dropout, self.sdpa = a, p, dropout, sdpa
        self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.c_attn, self.c_proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.c_fc, self.mlp_proj = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def drop(self, x):
        if self.dropout == "cpu":
            return F.dropout(x, self.p, training=True)
        if self.dropout == "fused":
            return torch.native_dropout(x, self.p, True)[0]
        return x

    def forward(self, x):
        b, s, h = x.shape
        a, dh = self.a, h // self.a
        tag("LayerNorm 1")
        y = self.ln_1(x)
        tag("QKV input")
        q, k, v = self.c_attn(y).split(h, dim=-1)
        q, k, v = (t.view(b, s, a, dh).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            tag("fused attention")
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.p if self.dropout != "none" else 0.0)
        else:
            tag("Q, K")
            sc = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
            tag("causal mask")
            sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
            tag("softmax output")
            pr = torch.softmax(sc, dim=-1)
            tag("softmax dropout mask")
            pr = self.drop(pr)
            tag("dropout output and V")
            o = pr @ v
        tag("out-proj input")
        o = self.c_proj(o.transpose(1, 2).reshape(b, s, h))
        tag("attention dropout mask")
        x = x + self.drop(o)
        tag("LayerNorm 2")
        y = self.ln_2(x)
        tag("fc1 input")
        y = self.c_fc(y)
        tag("GeLU input")
        y = F.gelu(y)
        tag("fc2 input")
        y = self.mlp_proj(y)
        tag("MLP dropout mask")
        return x + self.drop(y)


def saved_bytes(block, x):
    """Forward under saved_tensors_hooks: {tag: bytes} of every storage autograd saves, each counted once
    (under the first operation that saves it), parameters left out; and the dtypes seen per tag."""
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    seen, by_tag, dtypes, n_saved = set(), {}, {}, [0]
    SCORE[0] = 0

    def pack(t):
        n_saved[0] += 1
        st = t.untyped_storage()
        key = st.data_ptr()
        name = TAG[0]
        if name.startswith("LayerNorm") and t.dim() == 3 and t.shape[-1] == 1:
            name = "LayerNorm mean and rstd"
        if name == "softmax dropout mask" and t.dtype == torch.bool:
            MASKS.append(t)
        if name in ("Q, K", "dropout output and V") and t.dtype == torch.bfloat16 and t.shape[-1] != t.shape[-2]:
            QKV_STORAGES.add(key)                  # Q, K^T and V, not the s x s attention weights
        if key not in params and key not in seen:
            seen.add(key)
            if t.dim() >= 3 and t.shape[-1] == t.shape[-2] == x.shape[1]:
                SCORE[0] += st.nbytes()
            by_tag[name] = by_tag.get(name, 0) + st.nbytes()
            dtypes.setdefault(name, set()).add(t.dtype)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = block(x)
    return by_tag, dtypes, out, n_saved[0], len(seen)


def paper_terms(s, b, h, a):
    """Korthikanti et al. (2022), section 4.1: the bytes of each saved activation, 16-bit, 1-byte masks."""
    sbh, as2b = s * b * h, a * s * s * b
    return {
        "LayerNorm 1": 2 * sbh, "QKV input": 2 * sbh, "Q, K": 4 * sbh,
        "softmax output": 2 * as2b, "softmax dropout mask": as2b, "dropout output and V": 2 * as2b + 2 * sbh,
        "out-proj input": 2 * sbh, "attention dropout mask": sbh, "LayerNorm 2": 2 * sbh, "fc1 input": 2 * sbh,
        "GeLU input": 8 * sbh, "fc2 input": 8 * sbh, "MLP dropout mask": sbh,
    }


ORDER = ["LayerNorm 1", "QKV input", "Q, K", "causal mask", "softmax output", "softmax dropout mask",
         "dropout output and V", "fused attention", "out-proj input", "attention dropout mask", "LayerNorm 2",
         "fc1 input", "GeLU input", "fc2 input", "MLP dropout mask", "LayerNorm mean and rstd"]

h = fact("gpt2_hidden", "h", nudge=12)        # a nudge of one would not divide into the heads
a = fact("gpt2_heads", "a", nudge=4)          # 16 heads divide 768
C = fact("gpt2_context", "C")
L = fact("gpt2_layers", "L")
V = fact("gpt2_vocab", "V")
# the paper's constants are counts of its terms: a nudged constant is another formula, which the count refutes
lin = fact("korthikanti2022_linear_bytes", "c_lin", unit="B", nudge=0)
quad = fact("korthikanti2022_quadratic_bytes", "c_quad", unit="B", nudge=0)
s = given("s", 512)
b = given("b", 1)
p = given("p", 0.1)
seed = given("seed", 0, nudge=0)


def run(dropout, sdpa, s=s, b=b, h=h, a=a):
    torch.manual_seed(seed)
    block = GPT2Block(h, a, p, dropout, sdpa).to(torch.bfloat16)
    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    return saved_bytes(block, x)


paper = paper_terms(s, b, h, a)
closed = s * b * h * (lin + quad * a * s / h)
sanity("terms_sum_to_formula", sum(paper.values()) == closed,
       "the paper's terms add up to sbh(34 + 5as/h)", operands=(sum(paper.values()), closed), relation="equal")
value("paper_mb", closed / MB)
value("paper_linear_mb", s * b * h * lin / MB)
value("paper_quad_mb", s * b * h * quad * a * s / h / MB)
value("quad_coeff", quad * a * s / h)

QKV_STORAGES.clear()
fused, dt_fused, _, n_fused, n_st_fused = run("fused", False)
qkv_storages = value("qkv_storages", len(QKV_STORAGES))
# Q and K for QK^T, V for the product: views of the one fused QKV output where bmm can read them in place (one
# storage, saved at QK^T, holding V as well), copies where it cannot (three storages): by storage, 6 sbh either way
PAIR = ("Q, K", "dropout output and V")
sanity("qkv_by_storage", fused[PAIR[0]] + fused[PAIR[1]] == paper[PAIR[0]] + paper[PAIR[1]]
       and ((qkv_storages == 1 and fused[PAIR[0]] == 6 * s * b * h) or (qkv_storages == 3 and all(
           fused[t] == paper[t] for t in PAIR))),
       "Q, K and V come to 6 sbh bytes by storage, as one saved storage or as three",
       operands=(fused[PAIR[0]] + fused[PAIR[1]], paper[PAIR[0]] + paper[PAIR[1]]), relation="equal")
keep = value("mask_keep_frac", MASKS[0].float().mean().item())
sanity("mask_keeps_one_minus_p", abs(keep - (1 - p)) < 0.005,
       "the saved bool mask keeps a fraction 1 - p of the attention weights", operands=(keep, 1 - p))
cpu, dt_cpu, _, _, _ = run("cpu", False)
flash, dt_flash, _, _, _ = run("none", True)
nodrop, _, _, _, _ = run("none", False)

print(f"One GPT-2 block in bf16: h={h}, a={a}, s={s}, b={b}, dropout p={p}; bytes autograd saves, by operation")
print(f"  {'operation':<26}{'paper':>13}{'fused dropout':>15}{'CPU F.dropout':>15}{'SDPA, no drop':>15}")
for t in ORDER:
    cells = [paper.get(t), fused.get(t), cpu.get(t), flash.get(t)]
    print(f"  {t:<26}" + "".join(f"{c:>15,}" if c is not None else f"{'-':>15}" for c in cells))
tot = {k: sum(d.values()) for k, d in (("paper", paper), ("fused", fused), ("cpu", cpu), ("flash", flash),
                                       ("nodrop", nodrop))}
print(f"  {'total':<26}" + "".join(f"{tot[k]:>15,}" for k in ("paper", "fused", "cpu", "flash")))
print(f"  {n_fused} tensors saved on the fused path, {n_st_fused} storages once parameters and repeats are removed")

for k in ("fused", "cpu", "flash", "nodrop"):
    value(f"{k}_mb", tot[k] / MB)
KEYS = {"LayerNorm 1": "ln1", "QKV input": "qkv_in", "Q, K": "qk", "causal mask": "cmask",
        "softmax output": "sm", "softmax dropout mask": "smmask", "dropout output and V": "doutv",
        "fused attention": "sdpa", "out-proj input": "proj_in", "attention dropout mask": "amask",
        "LayerNorm 2": "ln2", "fc1 input": "fc1", "GeLU input": "gelu", "fc2 input": "fc2",
        "MLP dropout mask": "mmask", "LayerNorm mean and rstd": "lnstats"}
for col, d in (("paper", paper), ("fused", fused), ("cpu", cpu), ("flash", flash)):
    for t, nb in d.items():
        value(f"{col}_{KEYS[t]}", nb, unit="B")
    value(f"{col}_total", tot[col], unit="B")
value("n_saved_fused", n_fused,
      fixed="the count of tensors one GPT-2 block saves: set by its operations, not its sizes")
value("n_storages_fused", n_st_fused, fixed="the count of distinct storages among them: set by the operations")

# -- term by term: what differs, and why -------------------------------------------------------------
sbh, as2b = s * b * h, a * s * s * b
ln_stats = fused["LayerNorm mean and rstd"]
mask = fused["causal mask"]
value("ln_stats_bytes", ln_stats)
value("causal_mask_mb", mask / MB)
sanity("fused_matches_paper", all(fused[t] == paper[t] for t in paper if t not in PAIR)
       and tot["fused"] == closed + mask + ln_stats and mask + ln_stats > 0,
       "with the fused dropout every term of the paper is exact; the extra is the causal mask and LayerNorm stats",
       operands=(tot["fused"] - mask - ln_stats, closed), relation=("equal", "larger"))
sanity("extras_closed_form", mask == s * s and ln_stats == 2 * 2 * s * b * 2,
       "the causal mask is s^2 bool bytes; each LayerNorm saves a mean and an rstd of sb bf16 values",
       operands=(mask, s * s))
sanity("mask_ignores_a_and_b", all(run("fused", False, s=s, b=b2, h=h2, a=a2)[0]["causal mask"] == mask
                                   for b2, h2, a2 in ((2, h, a), (1, 2 * (h // a), 2))),
       "the saved causal mask does not grow with the batch or the head count", relation="does not grow")
value("fused_over_paper", tot["fused"] / closed)
sanity("extras_small", tot["fused"] > closed and (tot["fused"] - closed) / closed < 0.02,
       "the extras are under 2% of the formula", operands=(tot["fused"], closed), relation="larger")
value("extras_pct", (tot["fused"] - closed) / closed)
# on the CPU layer_norm keeps its mean and rstd in the activations' dtype; a GPU keeps them in fp32
# (its accumulate type)
ln_gpu = value("ln_stats_gpu_bytes", ln_stats // 2 * 4, unit="B")
value("ln_stats_gpu_pct", ln_gpu / tot["fused"])

# the masks: bool (1 byte) on the fused path, the input's dtype (bf16, 2 bytes) on the CPU's F.dropout
mask_terms = ["softmax dropout mask", "attention dropout mask", "MLP dropout mask"]
value("mask_bytes_fused", fused["softmax dropout mask"] // as2b, unit="B", fixed="a bool mask is 1 byte an element")
value("mask_bytes_cpu", cpu["softmax dropout mask"] // as2b, unit="B",
      fixed="F.dropout on the CPU keeps its noise in bf16")
sanity("mask_dtypes", all(dt_fused[t] == {torch.bool} for t in mask_terms)
       and all(dt_cpu[t] == {torch.bfloat16} for t in mask_terms)
       and all(cpu[t] == 2 * fused[t] for t in mask_terms),
       "fused dropout saves bool masks; the CPU's F.dropout saves bf16 noise, twice the bytes",
       operands=(cpu["softmax dropout mask"], fused["softmax dropout mask"]), relation="twice")
cpu_extra = value("cpu_extra_mb", (tot["cpu"] - tot["fused"]) / MB)
sanity("cpu_extra_is_masks", tot["cpu"] - tot["fused"] == as2b + 2 * sbh,
       "the CPU path saves as^2 b + 2 sbh more bytes: one more byte per mask element",
       operands=(tot["cpu"] - tot["fused"], as2b + 2 * sbh), relation="larger")

# the softmax output and the dropout output are two tensors; without dropout they are one storage
sm_storage_shared = nodrop.get("dropout output and V", 0) == fused["dropout output and V"] - 2 * as2b
value("nodrop_quad_mb", nodrop["softmax output"] / MB)
sanity("no_dropout_two_fifths", sm_storage_shared and nodrop["softmax output"] == 2 * as2b
       and tot["nodrop"] == 32 * sbh + 2 * as2b + mask + ln_stats,
       "without dropout the as^2 b terms fall from 5 to 2 bytes: softmax output and @V input are one storage",
       operands=(nodrop["softmax output"], 5 * as2b), relation="falls")

# the fused attention path: no s x s tensor is saved; the output and a logsumexp per row and head are
flash_att = flash["fused attention"]
value("flash_attn_mb", flash_att / MB)
sanity("flash_no_quadratic", flash_att == 6 * sbh + 2 * sbh + 4 * a * s * b and "softmax output" not in flash
       and dt_flash["fused attention"] == {torch.bfloat16, torch.float32},
       "SDPA saves Q, K, V (one storage, 6sbh), its output (2sbh) and an fp32 logsumexp (4asb): no as^2 b term",
       operands=(flash_att, 8 * sbh + 4 * a * s * b), relation="not")
value("lse_bytes", 4 * a * s * b)
value("flash_over_paper", tot["flash"] / closed)
# the out-projection reads the SDPA output through a view: same storage, counted once
sanity("flash_out_view", "out-proj input" not in flash,
       "the out-projection's input is a view of the SDPA output: one storage, counted once", relation="not")
flash_coeff = value("flash_linear_coeff", (tot["flash"] - 4 * a * s * b - ln_stats) / sbh,
                    fixed="bytes per sbh element of the operations' saved tensors: set by the block, not its sizes")
sanity("flash_coeff_32", flash_coeff == lin - 2, "the SDPA path saves 34 - 2 = 32 sbh bytes: the paper's linear terms "
       "without the two hidden dropout masks", operands=(flash_coeff, lin), relation="smaller")

# -- scaling: the formula against the count at other sizes ----------------------------------------------
print("\nThe fused-dropout count against the formula at other sizes (same h, a)")
print(f"  {'s':>6}{'b':>4}{'counted':>16}{'formula + extras':>18}")
agree = True
qkv_at = {}
for s2, b2 in ((128, 4), (256, 2), (384, 1)):
    QKV_STORAGES.clear()
    by, _, _, _, _ = run("fused", False, s=s2, b=b2)
    qkv_at[b2] = len(QKV_STORAGES)
    c2 = sum(by.values())
    f2 = s2 * b2 * h * (lin + quad * a * s2 / h) + s2 * s2 + 8 * s2 * b2
    agree &= c2 == f2
    print(f"  {s2:>6}{b2:>4}{c2:>16,}{f2:>18,.0f}")
value("qkv_storages_b2", qkv_at[2],
      fixed="Q, K and V, one copy each where the batched product cannot read views: set by the operations")
value("b_copies", 2, fixed="the batch of one of the sizes the check tries, chosen in the check")
sanity("qkv_copies_at_b2", qkv_at[2] == 3 and qkv_at[4] == 3,
       "at b = 2 and 4, Q, K and V are saved as three copies, which the paper's rows count exactly",
       operands=(qkv_at[2], qkv_storages), relation="larger")
sanity("formula_scales", agree, "the count equals the formula plus the two extras at every size tried",
       operands=(agree, True), relation="equal")

# -- the whole model, against its weights ---------------------------------------------------------------
n_params = V * h + C * h + L * (12 * h * h + 13 * h) + 2 * h          # GPT-2's count (I.1.A05)
act_model = value("model_act_gb", L * tot["fused"] / 10**9)
w_bf16 = value("weights_bf16_mb", 2 * n_params / MB)
ratio = value("act_over_weights", L * tot["fused"] / (2 * n_params))
sanity("act_exceed_weights", ratio > 1, "one sequence's activations exceed the bf16 weights",
       operands=(L * tot["fused"], 2 * n_params), relation="larger")

# -- Variation: the sequence length where the quadratic terms pass the linear ones ----------------------
# 5as^2b > 34sbh  <=>  s > 34 (h/a) / 5: the crossing depends on the head width h/a alone, so the probe runs a
# narrow block with GPT-2's head width and two heads, which is cheap
a_n = given("a_narrow", 2)
h_n = value("h_narrow", a_n * (h // a))
value("head_width", h // a)


def quad_vs_lin(s2):
    by, _, _, _, _ = run("fused", False, s=s2, b=1, h=h_n, a=a_n)
    q2 = SCORE[0]                                # bytes of the saved (.., s, s) storages: the score-sized ones
    return q2, sum(by.values()) - q2 - by["causal mask"] - by["LayerNorm mean and rstd"]


lo, hi = 96, 1024                                # the quadratic part is smaller at lo, larger at hi
q_lo, l_lo = quad_vs_lin(lo)
q_hi, l_hi = quad_vs_lin(hi)
assert q_lo < l_lo and q_hi > l_hi
probes = 2
while hi - lo > 1:                               # bisection on the counted bytes, real forward passes
    mid = (lo + hi) // 2
    q_m, l_m = quad_vs_lin(mid)
    probes += 1
    lo, hi = (mid, hi) if q_m <= l_m else (lo, mid)
s_cross = value("s_cross", hi)
value("s_below", lo)
value("probes", probes, fixed="a bisection over 96 to 1024 takes 2 + log2(928) rounded up probes")
value("s_cross_formula", lin * (h // a) / quad)
sanity("cross_closed_form", hi == math.floor(lin * h / (quad * a)) + 1 and (s > hi) == (tot["fused"] - mask - ln_stats
       - s * b * h * lin > s * b * h * lin),
       "the first s where 5as^2b exceeds 34sbh is floor(34h / 5a) + 1, for the narrow block and for GPT-2's",
       operands=(hi, lin * h / (quad * a)), relation=("smaller", "larger"))
print(f"\nVariation: with {a_n} heads of width {h // a}, the score-sized terms pass the rest first at s = {hi}"
      f" ({probes} probes; c_lin (h/a) / c_quad = {lin * (h // a) / quad:.1f})")
