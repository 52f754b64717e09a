(* The fixed-point inverse-CDF sampler (proofs/fixed_point_sampling.md). Mirrors
   core/base/rules.hpp fixed_target and the scans that use it (sample_categorical in
   core/sampling/sampling.cpp, the residual scans of core/verify/verify_chain.cpp and
   core/verify/verify_block.cpp): integer weights w_i (the to_fixed images), total
   W = sum w_i, k uniform bits b (k = 32 in speclab), target
   T = floor((2b+1) W / 2^(k+1)), i.e. floor(u W) for u = (b + 1/2)/2^k, and the token is
   the first i whose running sum exceeds T. All in nat, for every k. *)
From Coq Require Import PeanoNat.
From mathcomp Require Import all_ssreflect.
From mathcomp Require Import zify.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

(* fixed_target(bits, total) = floor((2 bits + 1) total / 2^(k+1)). *)
Definition fixed_target (k b W : nat) : nat := ((b.*2.+1) * W) %/ 2 ^ k.+1.

(* The scan: cumulative += w_t; the first t with cumulative > target. Falling off the end
   (unreachable, fixed_target_lt_total) returns the size. *)
Fixpoint scan (ws : seq nat) (cum target : nat) : nat :=
  if ws is w :: ws' then (if target < cum + w then 0 else (scan ws' (cum + w) target).+1)
  else 0.

(* The code's 128-bit evaluation: with prod = (2b+1) W = hi 2^64 + lo, lo < 2^64, it returns
   (hi << 31) | (lo >> 33). The two parts have no bit in common, so | is +, and the sum is
   prod / 2^33. *)
Lemma split_division hi lo a c :
  lo < 2 ^ (a + c) ->
  (hi * 2 ^ (a + c) + lo) %/ 2 ^ c = hi * 2 ^ a + lo %/ 2 ^ c.
Proof.
move=> _; rewrite expnD mulnA divnDl ?mulnK ?expn_gt0 //.
by apply/dvdn_mull/dvdnn.
Qed.

Lemma powE b e : Nat.pow b e = b ^ e.
Proof. by elim: e => //= e IH; rewrite expnS IH. Qed.

Lemma lor_disjoint hi x a : x < 2 ^ a -> Nat.lor (hi * 2 ^ a) x = hi * 2 ^ a + x.
Proof.
move=> lt_x.
have land0 : Nat.land (hi * 2 ^ a) x = 0.
  apply: Nat.bits_inj_0 => m; rewrite Nat.land_spec.
  case: (ltnP m a) => [lt_m|le_m].
    have -> : hi * 2 ^ a = Nat.shiftl hi a by rewrite Nat.shiftl_mul_pow2 powE.
    by rewrite Nat.shiftl_spec_low //; apply/ltP.
  case: (posnP x) => [->|x0]; first by rewrite Nat.bits_0 andbF.
  rewrite [Nat.testbit x m]Nat.bits_above_log2 ?andbF //.
  apply: (Nat.lt_le_trans _ a); last by apply/leP.
  apply/Nat.log2_lt_pow2; first by apply/ltP.
  by rewrite powE; apply/ltP.
by rewrite -Nat.lxor_lor // -Nat.add_nocarry_lxor.
Qed.

(* The 128-bit evaluation in general form: an odd factor below 2^c, a total below 2^(a+c)
   (one machine word), prod = hi 2^(a+c) + lo; ((hi << a) mod 2^(a+c)) | (lo >> c) is
   floor(prod / 2^c) and fits in the word. *)
Lemma word_split_target a c odd total :
  odd < 2 ^ c -> total < 2 ^ (a + c) ->
  let prod := odd * total in
  let hi := prod %/ 2 ^ (a + c) in
  let lo := prod %% 2 ^ (a + c) in
  Nat.lor ((hi * 2 ^ a) %% 2 ^ (a + c)) (lo %/ 2 ^ c) = prod %/ 2 ^ c
  /\ prod %/ 2 ^ c < 2 ^ (a + c).
Proof.
move=> lt_odd lt_total prod hi lo.
have lt_prod : prod < 2 ^ c * 2 ^ (a + c) by apply: ltn_mul.
have lt_hi : hi < 2 ^ c by rewrite /hi ltn_divLR ?expn_gt0.
have lt_shift : hi * 2 ^ a < 2 ^ (a + c).
  by rewrite expnD [2 ^ a * _]mulnC ltn_mul2r expn_gt0 /= lt_hi.
have lt_lo : lo < 2 ^ (a + c) by rewrite /lo ltn_pmod ?expn_gt0.
have lt_low : lo %/ 2 ^ c < 2 ^ a by rewrite ltn_divLR ?expn_gt0 // -expnD.
have eq_target : prod %/ 2 ^ c = hi * 2 ^ a + lo %/ 2 ^ c.
  by rewrite {1}(divn_eq prod (2 ^ (a + c))) -/hi -/lo split_division.
rewrite (modn_small lt_shift) lor_disjoint // -eq_target; split=> //.
by rewrite ltn_divLR ?expn_gt0 // mulnC.
Qed.

(* Exactly what fixed_target computes for bits < 2^32 and total < 2^64: odd = 2 bits + 1,
   prod = odd * total as an unsigned 128-bit integer, hi and lo its 64-bit halves,
   (hi << 31) | (lo >> 33) in 64 bits. It is fixed_target 32 bits total and fits in 64 bits. *)
Theorem fixed_target_code bits total :
  bits < 2 ^ 32 -> total < 2 ^ 64 ->
  let prod := (bits.*2.+1) * total in
  let hi := prod %/ 2 ^ 64 in
  let lo := prod %% 2 ^ 64 in
  Nat.lor ((hi * 2 ^ 31) %% 2 ^ 64) (lo %/ 2 ^ 33) = fixed_target 32 bits total
  /\ fixed_target 32 bits total < 2 ^ 64.
Proof.
move=> lt_bits lt_total.
have lt_odd : bits.*2.+1 < 2 ^ 33.
  by move: lt_bits; rewrite [2 ^ 33]expnS; move: (2 ^ 32) => n; lia.
have := @word_split_target 31 33 (bits.*2.+1) total lt_odd lt_total.
by [].
Qed.

(* ------------------------------------------------------------------------------------------
   The scan picks i exactly when S_{i-1} <= T < S_i, with S_{i-1} = sumn (take i ws) the sum
   of the weights before i. *)
Lemma sumn_take_next ws i : sumn (take i.+1 ws) = sumn (take i ws) + nth 0 ws i.
Proof.
elim: ws i => [|w ws IH] [|i] //=; first by rewrite take0 addn0.
by rewrite IH addnA.
Qed.

Lemma sumn_take_le ws i : sumn (take i ws) <= sumn ws.
Proof. by rewrite -{2}(cat_take_drop i ws) sumn_cat leq_addr. Qed.

Lemma scan_spec ws c T i :
  c <= T -> T < c + sumn ws ->
  (scan ws c T == i) = (c + sumn (take i ws) <= T < c + sumn (take i.+1 ws)).
Proof.
elim: ws c i => [|w ws IH] c i le_c lt_T /=.
  by move: lt_T; rewrite addn0 ltnNge le_c.
case: i => [|i] /=; first by rewrite take0 /= !addn0 le_c /=; case: ifP.
move: lt_T => /= lt_T; case: ifP => lt_w.
  by apply/esym/negbTE; rewrite negb_and -leqNgt; apply/orP; left; lia.
move/negbT: lt_w; rewrite -leqNgt => le_w.
by rewrite eqSS IH ?addnA //; lia.
Qed.

(* The fall-through of the scan is unreachable. *)
Lemma scan_lt_size ws c T : c <= T -> T < c + sumn ws -> scan ws c T < size ws.
Proof.
elim: ws c => [|w ws IH] c le_c /=; first by rewrite addn0 ltnNge le_c.
case: ifP => // /negbT; rewrite -leqNgt => le_w lt_T.
by rewrite ltnS IH // -addnA.
Qed.

(* T < W for every b: the target always lies inside the total. *)
Lemma fixed_target_lt k b W : b < 2 ^ k -> 0 < W -> fixed_target k b W < W.
Proof.
move=> lt_b W0; rewrite /fixed_target ltn_divLR ?expn_gt0 // mulnC ltn_mul2l W0 /=.
by rewrite expnS; move: (2 ^ k) lt_b => n; lia.
Qed.

(* A weight of 0 is never picked, for any target inside the total. *)
Theorem scan_never_zero ws T i :
  nth 0 ws i = 0 -> T < sumn ws -> scan ws 0 T != i.
Proof.
move=> w0 lt_T; rewrite scan_spec // sumn_take_next w0 addn0.
by case: leqP.
Qed.

(* ------------------------------------------------------------------------------------------
   Counting the 2^k values of b. below k W S: the number of b with (2b+1)/2^(k+1) < S/W, i.e.
   of grid midpoints u below S/W. picks k ws i: the number of b for which the sampler returns
   i; the probability of i is picks k ws i / 2^k. *)
Definition below k W S := count (fun b => b.*2.+1 * W < S * 2 ^ k.+1) (iota 0 (2 ^ k)).
Definition picks k ws i :=
  count (fun b => scan ws 0 (fixed_target k b (sumn ws)) == i) (iota 0 (2 ^ k)).

Lemma count_and_not (a c : pred nat) s :
  (forall x, c x -> a x) -> count (fun x => a x && ~~ c x) s + count c s = count a s.
Proof.
move=> ca; elim: s => [//|x s IH] /=.
by case cx: (c x); [rewrite (ca x cx) /= | case: (a x)]; rewrite /= -IH; lia.
Qed.

Lemma down_le (P : pred nat) n m : (forall b, P b.+1 -> P b) -> P n -> m <= n -> P m.
Proof.
move=> down; elim: n => [|n IH] Pn; first by rewrite leqn0 => /eqP ->.
by rewrite leq_eqVlt ltnS => /orP[/eqP -> //|]; apply: IH; apply: down.
Qed.

(* A downward-closed predicate holds below its count and nowhere else. *)
Lemma count_down (P : pred nat) n :
  (forall b, P b.+1 -> P b) -> forall b, b < n -> P b = (b < count P (iota 0 n)).
Proof.
move=> down; elim: n => [//|n IH] b lt_b.
rewrite -[n.+1]addn1 iotaD count_cat /= addn0 add0n.
case Pn: (P n).
  have -> : count P (iota 0 n) = n.
    rewrite -[RHS](size_iota 0 n) -count_predT; apply: eq_in_count => x.
    by rewrite mem_iota add0n => /andP[_ lt_x]; apply: (down_le down Pn); apply: ltnW.
  by rewrite addn1 lt_b; apply: (down_le down Pn).
rewrite addn0; case: (ltngtP b n) => [lt_bn|gt_bn|->]; first exact: IH.
  by move: lt_b; rewrite ltnS leqNgt gt_bn.
by rewrite Pn ltnNge (leq_trans (count_size _ _)) // size_iota.
Qed.

(* The count of midpoints below S/W is within 1/2 of 2^k S / W:
   |2W below - 2^(k+1) S| <= W. *)
Lemma below_bounds k W S :
  0 < W -> S <= W ->
  2 * W * below k W S <= S * 2 ^ k.+1 + W /\ S * 2 ^ k.+1 <= 2 * W * below k W S + W.
Proof.
move=> W0 le_S; rewrite /below expnS; move: (2 ^ k) => n.
set P := fun b => b.*2.+1 * W < S * (2 * n).
have down : forall b, P b.+1 -> P b.
  by move=> b; rewrite /P; apply: leq_ltn_trans; rewrite leq_mul2r ltnW ?orbT.
have spec := count_down (n := n) down.
have le_m : count P (iota 0 n) <= n by rewrite (leq_trans (count_size _ _)) // size_iota.
move: (count P (iota 0 n)) spec le_m => m spec le_m.
split.
  case: m spec le_m => [|m] spec le_m; first by rewrite muln0.
  have : P m by rewrite spec ?ltnSn //; apply: leq_trans le_m.
  rewrite /P; lia.
case: (ltngtP m n) => [lt_m||eq_m]; last 2 first.
- by move=> lt_n; move: le_m; rewrite leqNgt lt_n.
- rewrite eq_m; apply: (@leq_trans (W * (2 * n))); last by lia.
  by rewrite leq_mul2r le_S orbT.
have : ~~ P m by rewrite spec // ltnn.
by rewrite /P -leqNgt; lia.
Qed.

(* The exact law: i is picked by exactly the b whose midpoint lies in [S_{i-1}/W, S_i/W). *)
Theorem picks_exact k ws i :
  0 < sumn ws ->
  picks k ws i = below k (sumn ws) (sumn (take i.+1 ws)) - below k (sumn ws) (sumn (take i ws)).
Proof.
move=> W0; set W := sumn ws.
have le_S : sumn (take i ws) <= sumn (take i.+1 ws) by rewrite sumn_take_next leq_addr.
rewrite /picks /below -(count_and_not
  (a := fun b => b.*2.+1 * W < sumn (take i.+1 ws) * 2 ^ k.+1)
  (c := fun b => b.*2.+1 * W < sumn (take i ws) * 2 ^ k.+1) (iota 0 (2 ^ k))); last first.
  by move=> b /leq_trans; apply; rewrite leq_mul2r le_S orbT.
rewrite addnK; apply: eq_in_count => b; rewrite mem_iota add0n => /andP[_ lt_b].
rewrite scan_spec ?fixed_target_lt // !add0n andbC -leqNgt.
by rewrite /fixed_target ltn_divLR ?leq_divRL ?expn_gt0.
Qed.

(* The bound: |picks/2^k - w_i/W| <= 2^-k, stated without division:
   picks * W <= w_i 2^k + W and w_i 2^k <= picks * W + W. *)
Theorem picks_bound k ws i :
  0 < sumn ws ->
  picks k ws i * sumn ws <= nth 0 ws i * 2 ^ k + sumn ws
  /\ nth 0 ws i * 2 ^ k <= picks k ws i * sumn ws + sumn ws.
Proof.
move=> W0; have e := picks_exact k i W0.
have [b1 b1'] := below_bounds k W0 (sumn_take_le ws i.+1).
have [b0 b0'] := below_bounds k W0 (sumn_take_le ws i).
have mono : below k (sumn ws) (sumn (take i ws)) <= below k (sumn ws) (sumn (take i.+1 ws)).
  apply: sub_count => b /leq_trans; apply.
  by rewrite leq_mul2r sumn_take_next leq_addr orbT.
move: e b1 b1' b0 b0' mono; rewrite sumn_take_next expnS.
move: (below k (sumn ws) (sumn (take i ws) + nth 0 ws i)) => c1.
move: (below k (sumn ws) (sumn (take i ws))) => c0.
move: (picks k ws i) (sumn (take i ws)) (nth 0 ws i) (2 ^ k) (sumn ws) => m S w n W.
move=> e b1 b1' b0 b0' mono.
have e' : c1 = m + c0 by rewrite e subnK.
rewrite e' in b1 b1'; lia.
Qed.

(* Zero weights are never picked: no b maps to them. *)
Theorem picks_zero k ws i : 0 < sumn ws -> nth 0 ws i = 0 -> picks k ws i = 0.
Proof.
move=> W0 w0; rewrite picks_exact // sumn_take_next w0 addn0.
exact: subnn.
Qed.

(* speclab's instance: 32 uniform bits, totals below 2^64. *)
Corollary speclab_sampler ws i :
  0 < sumn ws -> sumn ws < 2 ^ 64 ->
  picks 32 ws i = below 32 (sumn ws) (sumn (take i.+1 ws)) - below 32 (sumn ws) (sumn (take i ws))
  /\ picks 32 ws i * sumn ws <= nth 0 ws i * 2 ^ 32 + sumn ws
  /\ nth 0 ws i * 2 ^ 32 <= picks 32 ws i * sumn ws + sumn ws
  /\ (nth 0 ws i = 0 -> picks 32 ws i = 0).
Proof.
move=> W0 _; split; first exact: picks_exact.
have [le1 le2] := picks_bound 32 i W0.
by split=> //; split=> //; apply: picks_zero.
Qed.
