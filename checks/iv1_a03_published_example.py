"""IV.1.A03 — a published benchmark read with nccl-tests' definitions.

Intel's Gaudi documentation prints, for an all-reduce and an all-gather on 8 ranks, a time, an "Algo
Bandwidth" and an "NW Bandwidth". From the size, the ranks and the time, the check recomputes what
nccl-tests would print as algbw = S / t and busbw = algbw * factor (S: the all-gather's whole output),
and sets them against the printed figures.
"""

from numbook.check import fact, sanity, value

n = fact("hccl_demo_ranks", "n_hccl")
loop = fact("hccl_demo_loop", "loop_hccl")
S_ar = fact("hccl_demo_ar_bytes", "S_ar_hccl", unit="B")
T_ar = fact("hccl_demo_ar_time_s", "T_ar_hccl_s", unit="s")
algo_ar = fact("hccl_demo_ar_algo_gbs", "algo_ar_hccl_gbs", unit="GB/s")
nw_ar = fact("hccl_demo_ar_nw_gbs", "nw_ar_hccl_gbs", unit="GB/s")
S_in = fact("hccl_demo_ag_input_bytes", "S_in_hccl", unit="B")
T_ag = fact("hccl_demo_ag_time_s", "T_ag_hccl_s", unit="s")
algo_ag = fact("hccl_demo_ag_algo_gbs", "algo_ag_hccl_gbs", unit="GB/s")
nw_ag = fact("hccl_demo_ag_nw_gbs", "nw_ag_hccl_gbs", unit="GB/s")

# all-reduce: S is the buffer every rank holds
t_ar = value("t_ar_us", T_ar / loop * 1e6, unit="us")
alg_ar = value("algbw_ar_gbs", S_ar / (t_ar * 1e-6) / 1e9, unit="GB/s")
f_ar = value("factor_ar", 2 * (n - 1) / n)
bus_ar = value("busbw_ar_gbs", alg_ar * f_ar, unit="GB/s")
value("printed_ratio_ar", nw_ar / algo_ar)
value("S_ar_mib", S_ar / 2**20, unit="MiB")
value("under_ar", 1 - alg_ar / bus_ar)
print(f"all-reduce, {n} ranks, {S_ar:,} B, {loop} iterations in {T_ar} s: t = {t_ar:.3f} us per call")
print(f"  nccl-tests: algbw = S/t = {alg_ar:.3f} GB/s, busbw = algbw x 2(n-1)/n = {alg_ar:.3f} x {f_ar:.3f} "
      f"= {bus_ar:.3f} GB/s")
print(f"  printed:    Algo Bandwidth {algo_ar} GB/s, NW Bandwidth {nw_ar} GB/s (ratio {nw_ar / algo_ar:.6f})")

# all-gather: nccl-tests' S is the whole output, n times one rank's input
S_out = value("S_out_ag", n * S_in, unit="B")
t_ag = value("t_ag_us", T_ag / loop * 1e6, unit="us")
alg_in = value("algbw_in_ag_gbs", S_in / (t_ag * 1e-6) / 1e9, unit="GB/s")
alg_ag = value("algbw_ag_gbs", S_out / (t_ag * 1e-6) / 1e9, unit="GB/s")
f_ag = value("factor_ag", (n - 1) / n)
bus_ag = value("busbw_ag_gbs", alg_ag * f_ag, unit="GB/s")
value("printed_ratio_ag", nw_ag / algo_ag)
value("S_in_mib", S_in / 2**20, unit="MiB")
value("S_out_mib", S_out / 2**20, unit="MiB")
ratio_tools = value("alg_over_input_ag", alg_ag / alg_in)
sanity("tools_differ", abs(ratio_tools - n) < 1e-9 and n > 1,
       "one rank's input over t and the whole output over t differ by a factor of n",
       operands=(alg_ag, alg_in), relation="differs")
print(f"all-gather, {n} ranks, {S_in:,} B in per rank, {S_out:,} B out, {loop} iterations in {T_ag} s: "
      f"t = {t_ag:.3f} us per call")
print(f"  input per rank / t = {alg_in:.3f} GB/s; nccl-tests: algbw = S_out/t = {alg_ag:.3f} GB/s, "
      f"busbw = algbw x (n-1)/n = {bus_ag:.3f} GB/s")
print(f"  printed:    Algo Bandwidth {algo_ag} GB/s, NW Bandwidth {nw_ag} GB/s (ratio {nw_ag / algo_ag:.6f})")

# the Variation: the same per-call time on 4 ranks; the factor of a 16-rank all-gather
var_n = value("var_n", 4, fixed="the Variation's rank count")
value("var_busbw_gbs", alg_ar * 2 * (var_n - 1) / var_n, unit="GB/s")
value("var_factor_ar", 2 * (var_n - 1) / var_n, fixed="2(n-1)/n at the Variation's n")
var_n_ag = value("var_n_ag", 16, fixed="the Variation's all-gather rank count")
value("var_factor_ag", (var_n_ag - 1) / var_n_ag, fixed="(n-1)/n at the Variation's n")
