"""II.1.A01 — The training state per parameter, taken apart: fp32, autocast, bf16 with fp32 master weights, pure bf16.

Builds a small Llama-style model (RMSNorm, rotary-free causal attention, SwiGLU MLP, untied head) as
real CPU tensors, and runs one real training step of each recipe: forward on real tokens, a real
cross-entropy backward, and one real torch.optim.AdamW step. The bytes of every role are read from
the real tensors: the parameters, their .grad, and every tensor of AdamW's state_dict(). The
formula "bytes per parameter times N, plus one 4-byte step counter per parameter tensor" is checked
on the small model, then on Llama 2 7B built on the meta device with AdamW stepping its meta
tensors, and the totals are set against one H100's memory: its datasheet figure and what the
device reports to nvidia-smi.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from numbook.check import fact, given, sanity, value

torch.set_num_threads(1)
GB, MiB = 10**9, 2**20


def row(label, *cells, w=28, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


class Block(nn.Module):
    """One Llama layer, named as in its checkpoint: two RMSNorms, q/k/v/o without biases, SwiGLU."""

    def __init__(self, d, H, Hkv, f):
        super().__init__()
        self.H, self.Hkv, self.Dh = H, Hkv, d // H
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(d), nn.RMSNorm(d)
        self.q_proj, self.o_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, Hkv * self.Dh, bias=False)
        self.v_proj = nn.Linear(d, Hkv * self.Dh, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, self.H, self.Dh).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.Hkv, self.Dh).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.Hkv, self.Dh).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.Hkv != self.H)
        x = x + self.o_proj(a.transpose(1, 2).reshape(B, T, -1))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, V, d, L, H, Hkv, f):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, d)
        self.layers = nn.ModuleList(Block(d, H, Hkv, f) for _ in range(L))
        self.norm = nn.RMSNorm(d)
        self.lm_head = nn.Linear(d, V, bias=False)

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())


def closed_form(V, d, L, H, Hkv, f):
    """Parameters of the architecture: embedding and head, per layer q, o (d x d), k, v (d x Hkv Dh),
    three MLP matrices, two norms; the final norm."""
    kv = Hkv * (d // H)
    return 2 * V * d + L * (2 * d * d + 2 * d * kv + 3 * d * f + 2 * d) + d, 2 + 9 * L + 1


def nbytes(ts):
    return sum(t.nbytes for t in ts)


def storages(ts):
    return [t.untyped_storage().data_ptr() for t in ts]


AUTOCAST = {}
RECIPES = ["fp32", "fp32 + autocast bf16", "bf16 + fp32 master", "pure bf16"]
ROLES = ["weights", "gradients", "fp32 master weights", "AdamW exp_avg", "AdamW exp_avg_sq", "AdamW step"]


def train_step(recipe, make, tokens, meta=False):
    """One real step of the recipe. Returns the tensors of every role at the optimizer step, the
    working model (whose weights the next forward reads) and the fp32 gradient copies (transient)."""
    master = None
    if recipe == "bf16 + fp32 master":
        master = make()                                    # fp32 master weights
        with torch.device("meta"):
            work = make()
        work.load_state_dict({k: v.to(torch.bfloat16) for k, v in master.state_dict().items()}, assign=True)
    else:
        work = make()
        if recipe == "pure bf16":
            work = work.to(torch.bfloat16)
    if meta:  # the meta device has no values: the gradients a backward pass would leave, shape and dtype only
        for p in work.parameters():
            p.grad = torch.empty_like(p)
    elif recipe == "fp32 + autocast bf16":
        # which saved tensors are bf16 copies of the Linear weights, made by autocast for this step?
        weights = [m.weight for m in work.modules() if isinstance(m, nn.Linear)]
        copies = {}
        params = {q.untyped_storage().data_ptr() for q in work.parameters()}
        saved = {}   # the other saved tensors, by storage: (dtype, bytes)

        def pack(t):
            ptr = t.untyped_storage().data_ptr()
            if ptr not in params:
                saved[ptr] = (t.dtype, t.untyped_storage().nbytes())
            if t.dtype == torch.bfloat16 and t.dim() == 2:
                for w in weights:
                    for c in (t, t.t()):
                        if c.shape == w.shape and torch.equal(c, w.detach().to(torch.bfloat16)):
                            copies[t.untyped_storage().data_ptr()] = (t.untyped_storage().nbytes(), w.numel())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", dtype=torch.bfloat16):
            loss = work(tokens)
        AUTOCAST["copies"] = copies
        dtypes = sorted({d for d, _ in saved.values()}, key=str)   # sorted: a set's order changes between processes
        AUTOCAST["saved_by_dtype"] = {str(dt): sum(nb for k, (d, nb) in saved.items() if d == dt and k not in copies)
                                      for dt in dtypes}
        AUTOCAST["linear_numel"] = sum(w.numel() for w in weights)
        loss.backward()
    else:
        loss = work(tokens)
        AUTOCAST.setdefault("loss", {})[recipe] = loss.item()
        loss.backward()
    transient = []
    if master is not None:
        for p, q in zip(master.parameters(), work.parameters(), strict=True):
            p.grad = q.grad.float()                        # fp32 copies of the bf16 gradients
        transient = [p.grad for p in master.parameters()]
    target = master if master is not None else work
    before = [p.detach().clone() for p in work.parameters()] if not meta else None
    before_t = [p.detach().clone() for p in target.parameters()] if not meta else None
    opt = torch.optim.AdamW(target.parameters())           # torch's defaults: lr 1e-3, weight decay 0.01
    opt.step()
    if master is not None:
        with torch.no_grad():
            for p, q in zip(master.parameters(), work.parameters(), strict=True):
                q.copy_(p)                                 # the bf16 weights follow the updated master
    state = opt.state_dict()["state"]                      # {index: {"step", "exp_avg", "exp_avg_sq"}}
    roles = {
        "weights": list(work.parameters()),
        "gradients": [p.grad for p in work.parameters()],
        "fp32 master weights": list(master.parameters()) if master is not None else [],
        "AdamW exp_avg": [s["exp_avg"] for s in state.values()],
        "AdamW exp_avg_sq": [s["exp_avg_sq"] for s in state.values()],
        "AdamW step": [s["step"] for s in state.values()],
    }
    moved = None if meta else (
        [not torch.equal(a, p.detach()) for a, p in zip(before, work.parameters(), strict=True)],
        [not torch.equal(a, p.detach()) for a, p in zip(before_t, target.parameters(), strict=True)])
    return roles, transient, moved


# -- the small model, real tensors ------------------------------------------------------------------
V_s = given("V_s", 256)
H_s = given("H_s", 4, nudge=4)             # 8 heads still divide the width
d_s = given("d_s", 64, nudge=4)            # a nudge of one would not divide into the heads
L_s = given("L_s", 2)
f_s = given("f_s", 172)
B_s = given("B_s", 4)
T_s = given("T_s", 32)
seed = given("seed", 0, nudge=0)

g = torch.Generator().manual_seed(seed)
tokens = torch.randint(0, V_s, (B_s, T_s), generator=g)


def make_small():
    torch.manual_seed(seed)
    return Llama(V_s, d_s, L_s, H_s, H_s, f_s)


N_s = value("N_s", sum(p.numel() for p in make_small().parameters()))
n_tensors_s = value("n_tensors_s", len(list(make_small().parameters())))
sanity("small_closed_form", (N_s, n_tensors_s) == closed_form(V_s, d_s, L_s, H_s, H_s, f_s),
       "the small model's parameter and tensor counts equal the closed form", operands=(N_s, closed_form(
           V_s, d_s, L_s, H_s, H_s, f_s)[0]), relation="equal")

print(f"Small model: V={V_s}, d={d_s}, L={L_s}, H={H_s}, f={f_s}: {N_s:,} parameters in {n_tensors_s} tensors")
print(f"One real step of each recipe on {B_s} x {T_s} tokens; bytes read from the tensors\n")
row("role (bytes per parameter)", *[r.split(" +")[0] if r != "fp32 + autocast bf16" else "autocast" for r in RECIPES])

per_param = {}        # recipe -> role -> bytes per parameter
totals = {}
all_ptrs_distinct = True
moved = {}
state_dtypes = {}
for recipe in RECIPES:
    roles, transient, moved[recipe] = train_step(recipe, make_small, tokens)
    names = [n for n, _ in make_small().named_parameters()]
    counted = {r: nbytes(ts) for r, ts in roles.items()}
    per_param[recipe] = {r: counted[r] / N_s for r in ROLES if r != "AdamW step"}
    totals[recipe] = sum(counted.values())
    ptrs = [p for r in ROLES for p in storages(roles[r])]
    all_ptrs_distinct &= len(ptrs) == len(set(ptrs))
    state_dtypes[recipe] = {t.dtype for t in roles["AdamW exp_avg"] + roles["AdamW exp_avg_sq"]}
    if recipe == "bf16 + fp32 master":
        value("transient_fp32_grad_per_param", nbytes(transient) / N_s, fixed="an fp32 element is 4 bytes")
    step_bytes = counted["AdamW step"]
    step_elem = roles["AdamW step"][0].element_size()
    state_counts = (len(roles["AdamW exp_avg"]), len(roles["AdamW step"]))

for r in ROLES[:-1]:
    row(r, *[f"{per_param[rc][r]:g}" for rc in RECIPES])
row("AdamW step (bytes)", *[step_bytes] * len(RECIPES))
row("total bytes", *[f"{totals[rc]:,}" for rc in RECIPES])

WHY = "bytes per element of the recipe's dtypes: no size of the model moves it"
slug = {"fp32": "fp32", "fp32 + autocast bf16": "autocast", "bf16 + fp32 master": "mixed", "pure bf16": "bf16"}
short = {"weights": "w", "gradients": "g", "fp32 master weights": "master", "AdamW exp_avg": "m",
         "AdamW exp_avg_sq": "v"}
bpp = {}
for rc in RECIPES:
    for r in ROLES[:-1]:
        value(f"{slug[rc]}_{short[r]}_per_param", per_param[rc][r], unit="B", fixed=WHY)
    bpp[rc] = value(f"{slug[rc]}_per_param", sum(per_param[rc].values()), unit="B", fixed=WHY)
    value(f"{slug[rc]}_total_bytes", totals[rc])
value("step_bytes_small", step_bytes, unit="B")
value("n_tokens", B_s * T_s)
loss0 = value("loss_fp32", AUTOCAST["loss"]["fp32"])
print(f"\nloss before the step: {loss0:.4f}; ln |V| = {math.log(V_s):.4f}")
value("ln_V_s", math.log(V_s))
# random logits of spread sigma give about ln|V| + sigma^2 / 2: a little above ln|V|
sanity("loss_untrained", math.log(V_s) < loss0 < math.log(V_s) + 0.5,
       "the loss before the step is a little above ln |V|, as for an untrained model: the forward pass is real",
       operands=(loss0, math.log(V_s)), relation="larger")
cp = AUTOCAST["copies"]
copies_bytes = value("autocast_copies_bytes", sum(nb for nb, _ in cp.values()), unit="B")
value("autocast_copies_per_linear_param", copies_bytes / AUTOCAST["linear_numel"], unit="B",
      fixed="a bf16 copy is 2 bytes an element")
value("linear_params_s", AUTOCAST["linear_numel"])
value("autocast_copies_n", len(cp))
by_dtype = AUTOCAST["saved_by_dtype"]
print("activations autocast saves, by dtype (bytes, by storage, less the weight copies):", by_dtype)
sanity("autocast_saves_some_fp32", by_dtype.get("torch.bfloat16", 0) > 0 and by_dtype.get("torch.float32", 0) > 0,
       "under autocast the saved activations are partly bf16 (the matrix products' inputs) and partly fp32",
       operands=(by_dtype.get("torch.float32", 0), 0))
sanity("autocast_keeps_copies", copies_bytes == 2 * AUTOCAST["linear_numel"] and len(cp) == 7 * L_s + 1,
       "autocast saves one bf16 copy of every Linear weight for the backward pass, 2 bytes per element",
       operands=(copies_bytes, 2 * AUTOCAST["linear_numel"]), relation="equal")
value("step_elem", step_elem, unit="B", fixed="AdamW keeps each step count as an fp32 scalar tensor: a choice of torch")

# the formula: bytes per parameter times N, plus one step counter per parameter tensor
sanity("formula_small", all(totals[rc] == bpp[rc] * N_s + step_elem * n_tensors_s for rc in RECIPES),
       "every recipe's measured total equals bytes-per-parameter x N + 4 x tensors", operands=(
           totals["fp32"], bpp["fp32"] * N_s + step_elem * n_tensors_s), relation="equal")
sanity("one_counter_per_tensor", state_counts == (n_tensors_s, n_tensors_s),
       "AdamW's state_dict holds one exp_avg, exp_avg_sq and step per parameter tensor")
sanity("no_sharing", all_ptrs_distinct, "no two tensors of any roles share storage", relation="not")
# the step is real: it changed every weight tensor of the working model, except, in pure bf16, the norm gains,
# whose update (about lr = 1e-3) is below half the bf16 spacing just under 1.0 (2^-9) and rounds away (chapter II.3)
stuck = [n for n, m in zip(names, moved["pure bf16"][0], strict=True) if not m]
print("\ntensors of the working model unchanged by the step:",
      {rc: sum(not m for m in moved[rc][0]) for rc in RECIPES}, stuck)
print("tensors the optimizer updates unchanged by the step:", {rc: sum(not m for m in moved[rc][1]) for rc in RECIPES})
n_stuck = value("bf16_stuck_tensors", len(stuck))
defaults = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))]).defaults
value("lr", defaults["lr"], fixed="torch's default learning rate for AdamW, a property of the library")
value("weight_decay", defaults["weight_decay"],
      fixed="torch's default weight decay for AdamW, a property of the library")
one = torch.tensor(1.0, dtype=torch.bfloat16)
below_one = torch.nextafter(one, torch.tensor(0.0, dtype=torch.bfloat16))
half_gap = value("half_gap_below_one", (one - below_one).float().item() / 2,
                 fixed="half the bf16 spacing just below 1.0: a property of the format")
sanity("update_below_half_gap", defaults["lr"] * (1 + defaults["weight_decay"]) < half_gap,
       "AdamW's first update of a gain at 1.0 (lr times the sign, plus lr x wd) is below half the bf16 spacing",
       operands=(defaults["lr"], half_gap), relation="smaller")
n_norms = value("n_norms_s", 2 * L_s + 1)
is_norm = [n.endswith("layernorm.weight") or n == "norm.weight" for n in names]
sanity("step_was_real", all(all(moved[rc][1]) for rc in RECIPES[:3]) and all(all(moved[rc][0]) for rc in RECIPES[:2])
       and moved["pure bf16"][0] == moved["bf16 + fp32 master"][0] == [not x for x in is_norm]
       and n_stuck == n_norms,
       "the step changed every tensor it updates, except in pure bf16 the norm gains, which stay at 1.0",
       operands=(n_stuck, n_norms), relation="equal")
sanity("moments_follow_params", state_dtypes["pure bf16"] == {torch.bfloat16}
       and state_dtypes["bf16 + fp32 master"] == {torch.float32},
       "AdamW's moments take the dtype of the parameters it updates: bf16 for pure bf16, fp32 on the master")
sanity("sixteen_three_ways", bpp["fp32"] == bpp["fp32 + autocast bf16"] == bpp["bf16 + fp32 master"] == 16,
       "fp32, autocast and bf16 with fp32 master all hold 16 bytes per parameter", operands=(
           bpp["bf16 + fp32 master"], bpp["fp32"]), relation="equal")
sanity("pure_bf16_half", bpp["pure bf16"] * 2 == bpp["fp32"], "pure bf16 holds half of the others",
       operands=(bpp["pure bf16"], bpp["fp32"]), relation="half")
optimizer_share = value("mixed_optimizer_share", (per_param["bf16 + fp32 master"]["fp32 master weights"]
                        + per_param["bf16 + fp32 master"]["AdamW exp_avg"]
                        + per_param["bf16 + fp32 master"]["AdamW exp_avg_sq"]) / bpp["bf16 + fp32 master"],
                        fixed=WHY)
sanity("optimizer_dominates", optimizer_share > 0.5, "master weights and moments are more than the working weights"
       " and gradients", operands=(optimizer_share, 1 - optimizer_share), relation="larger")

# -- Llama 2 7B, on the meta device -----------------------------------------------------------------
V = fact("llama2_7b_vocab", "V")
d = fact("llama2_7b_hidden", "d")
L = fact("llama2_7b_layers", "L")
H = fact("llama2_7b_heads", "H")
Hkv = fact("llama2_7b_kv_heads", "Hkv")
f = fact("llama2_7b_intermediate", "f")
N, n_t = closed_form(V, d, L, H, Hkv, f)
N = value("N_7b", N)
value("n_tensors_7b", n_t)


def make_7b():
    with torch.device("meta"):
        return Llama(V, d, L, H, Hkv, f)


print(f"\nLlama 2 7B on the meta device: {N:,} parameters in {n_t} tensors")
row("recipe", "formula GB", "AdamW meta GB", cw=16)
gb_7b = {}
meta_agrees = True
step_devices = set()
for rc in RECIPES:
    roles, _, _ = train_step(rc, make_7b, None, meta=True)
    step_devices |= {t.device.type for t in roles["AdamW step"]}
    param_devices = {t.device.type for t in roles["weights"]}
    meta_total = sum(nbytes(ts) for ts in roles.values())
    formula = bpp[rc] * N + step_elem * n_t
    meta_agrees &= meta_total == formula and len(roles["AdamW step"]) == n_t
    gb_7b[rc] = value(f"{slug[rc]}_7b_gb", meta_total / GB)
    row(rc, f"{formula / GB:.2f}", f"{meta_total / GB:.2f}", cw=16)
sanity("formula_7b", meta_agrees, "AdamW's state on the meta Llama 2 7B equals the formula in every recipe",
       operands=(gb_7b["fp32"], (bpp["fp32"] * N + step_elem * n_t) / GB), relation="equal")
sanity("steps_stay_on_cpu", step_devices == {"cpu"} and param_devices == {"meta"},
       "AdamW's default (foreach) implementation keeps each step counter on the CPU, off the parameters' device",
       relation="not")
sanity("count_7b", sum(p.numel() for p in make_7b().parameters()) == N, "meta model count equals the closed form")
value("w_bf16_7b_gb", 2 * N / GB)
# autocast's bf16 weight copies at Llama 2 7B: 2 bytes for every parameter of a Linear (all but the embedding and norms)
value("autocast_copies_7b_gb", copies_bytes / AUTOCAST["linear_numel"] * (N - V * d - (2 * L + 1) * d) / GB)

# -- one H100 -----------------------------------------------------------------------------------------
cap_ds = fact("h100_sxm_memory_gb", "cap_ds_gb")
smi_mib = fact("h100_sxm_memory_reported_mib", "smi_mib")
# what the CUDA runtime reports: all a program sees
cap_rep_mib = fact("h100_sxm_memory_cuda_total_mib", "cap_rep_mib")
cap_rep = value("cap_rep_gb", cap_rep_mib * MiB / GB)
value("smi_over_runtime_mib", smi_mib - cap_rep_mib)
sanity("smi_above_runtime", smi_mib > cap_rep_mib, "nvidia-smi's total is larger than the CUDA runtime's",
       operands=(smi_mib, cap_rep_mib), relation="larger")
print(f"\nOne H100 SXM: datasheet {cap_ds} GB; the CUDA runtime reports {cap_rep_mib:,} MiB = {cap_rep:.2f} GB "
      f"(nvidia-smi {smi_mib:,} MiB)")
row("recipe", "GB", "/ datasheet", "/ reported")
for rc in RECIPES:
    row(rc, f"{gb_7b[rc]:.2f}", f"{gb_7b[rc] / cap_ds:.2f}", f"{gb_7b[rc] / cap_rep:.2f}")
over = value("mixed_7b_over_ds", gb_7b["bf16 + fp32 master"] / cap_ds)
value("mixed_7b_over_rep", gb_7b["bf16 + fp32 master"] / cap_rep)
sanity("sixteen_does_not_fit", all(gb_7b[rc] > cap_rep > cap_ds for rc in RECIPES[:3]),
       "at 16 bytes per parameter Llama 2 7B's state exceeds both figures for one H100",
       operands=(gb_7b["bf16 + fp32 master"], cap_rep), relation="larger")
room_ds = value("bf16_room_ds_gb", cap_ds - gb_7b["pure bf16"])
room_rep = value("bf16_room_rep_gb", cap_rep - gb_7b["pure bf16"])
sanity("bf16_fits", room_ds > 0 and room_rep > 0, "pure bf16 fits under both figures",
       operands=(gb_7b["pure bf16"], cap_ds), relation="smaller")

# -- Variation: the largest parameter count whose state fits --------------------------------------------
print("\nVariation: the largest N whose state fits one H100 (ignoring the step counters)")
row("recipe", "datasheet", "reported")
for rc, key in (("bf16 + fp32 master", "mixed"), ("pure bf16", "bf16")):
    n_ds = value(f"nmax_{key}_ds_b", cap_ds * GB // bpp[rc] / 1e9)
    n_rep = value(f"nmax_{key}_rep_b", cap_rep_mib * MiB // bpp[rc] / 1e9)
    row(rc, f"{n_ds:.2f} B", f"{n_rep:.2f} B")
V3 = fact("llama3_8b_vocab", "V3")
d3 = fact("llama3_8b_hidden", "d3")
L3 = fact("llama3_8b_layers", "L3")
H3 = fact("llama3_8b_heads", "H3")
Hkv3 = fact("llama3_8b_kv_heads", "Hkv3")
f3 = fact("llama3_8b_intermediate", "f3")
N3, n_t3 = closed_form(V3, d3, L3, H3, Hkv3, f3)
N3 = value("N_8b", N3)
bf16_8b = value("bf16_8b_gb", (bpp["pure bf16"] * N3 + step_elem * n_t3) / GB)
mixed_8b = value("mixed_8b_gb", (bpp["bf16 + fp32 master"] * N3 + step_elem * n_t3) / GB)
print(f"Llama 3 8B: {N3:,} parameters: pure bf16 {bf16_8b:.2f} GB, mixed {mixed_8b:.2f} GB")
sanity("llama3_bf16_fits", bf16_8b < cap_ds < mixed_8b,
       "Llama 3 8B fits one H100 in pure bf16, not in the mixed recipe", operands=(bf16_8b, cap_ds),
       relation="smaller")
sanity("llama2_between", cap_ds / bpp["bf16 + fp32 master"] < N / 1e9 and cap_ds / bpp["pure bf16"] > N / 1e9,
       "Llama 2 7B lies between the two largest counts", operands=(N / 1e9, cap_ds / 16), relation="larger")
