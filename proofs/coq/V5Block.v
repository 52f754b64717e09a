(* V5 block verification is lossless (proofs/v5_block.md; Sun et al. 2024, "Block
   verification accelerates speculative decoding"). Mirrors docs/verifiers.md V5 as
   implemented in core/verify/verify_block.cpp (block_weights: w_i, Z_i, h_i; verify_request:
   tau the largest i with eta_i <= h_i, then the residual norm((w_tau p - q)^+) or the bonus
   token; block_residual_fixed in core/base/rules.hpp). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From Speclab Require Import Dist.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory Num.Def Order.TTheory.
Local Open Scope ring_scope.

Section Block.

Variable T : finType.
(* Target and draft rows after the tokens s (context and drafts so far). *)
Variables p q : seq T -> T -> rat.
Hypothesis p_dist : forall s, is_dist (p s).
Hypothesis q_dist : forall s, is_dist (q s).
Variable gamma : nat.

(* w_{i+1} = min(1, w_i p(x)/q(x)), and 0 when q(x) = 0 (block_weights). *)
Definition wnext s w x := ratio (w * p s x) (q s x).

(* Z_i = sum_x max(0, w_i p_{i+1}(x) - q_{i+1}(x)). *)
Definition zmass s w := \sum_x maxr 0 (w * p s x - q s x).

(* h_i = min(1, Z_i / (Z_i + 1 - w_i)), and 1 when the denominator is 0. *)
Definition hstop s w :=
  let d := zmass s w + (1 - w) in if 0 < d then minr 1 (zmass s w / d) else 1.

(* The last token after tau = i < gamma: norm((w_i p_{i+1} - q_{i+1})^+), or p_{i+1} when that
   has no mass (residual_fallback). *)
Definition rho s w y :=
  if zmass s w == 0 then p s y else maxr 0 (w * p s y - q s y) / zmass s w.

(* surv g s w = P(tau >= i | x_{<=i}) at position i = gamma - g with tokens s and weight w_i = w:
   tau >= i iff tau >= i+1, or eta_i <= h_i and tau < i+1 (eta_i independent of the rest);
   at i = gamma, h_gamma = w_gamma. *)
Fixpoint surv (g : nat) (s : seq T) (w : rat) : rat :=
  if g is g'.+1 then
    let a := \sum_x q s x * surv g' (rcons s x) (wnext s w x) in a + hstop s w * (1 - a)
  else w.

(* P(tau = i | x_{<=i}) for i < gamma. *)
Definition stop_prob g' s w :=
  hstop s w * (1 - \sum_x q s x * surv g' (rcons s x) (wnext s w x)).

(* P(tau >= i, (i+1)-th emitted token = y | x_{<=i}): the next draft y kept (tau >= i+1), or
   tau = i and the residual draws y, or (i = gamma) the bonus token. *)
Definition block_next (g : nat) (s : seq T) (w : rat) (y : T) : rat :=
  if g is g'.+1 then q s y * surv g' (rcons s y) (wnext s w y) + stop_prob g' s w * rho s w y
  else w * p s y.

Lemma wnext_ge0 s w x : 0 <= w -> 0 <= wnext s w x.
Proof.
move=> w0; apply: ratio_ge0; last by case: (q_dist s).
by apply: mulr_ge0 => //; case: (p_dist s).
Qed.

Lemma wnext_le1 s w x : wnext s w x <= 1.
Proof. exact: ratio_le1. Qed.

Lemma zmass_ge0 s w : 0 <= zmass s w.
Proof. by apply: sumr_ge0 => x _; apply: pos_part_ge0. Qed.

(* Drafting x and keeping weight min(1, w p/q): q(x) w_{i+1}(x) = min(q(x), w p(x)). *)
Lemma q_wnext s w x : 0 <= w -> q s x * wnext s w x = minr (q s x) (w * p s x).
Proof.
move=> w0; apply: mul_ratio; last by case: (q_dist s).
by apply: mulr_ge0 => //; case: (p_dist s).
Qed.

(* E_{x ~ q}[min(1, w p(x)/q(x))] = w - Z. *)
Lemma sum_q_wnext s w : 0 <= w -> \sum_x q s x * wnext s w x = w - zmass s w.
Proof.
move=> w0; rewrite /zmass.
have -> : \sum_x q s x * wnext s w x = \sum_x (w * p s x - maxr 0 (w * p s x - q s x)).
  apply: eq_bigr => x _; rewrite q_wnext //.
  by apply/eqP; rewrite eq_sym subr_eq min_plus_pos.
by rewrite sumrB -mulr_sumr; case: (p_dist s) => _ ->; rewrite mulr1.
Qed.

(* h_i (1 - w_i + Z_i) = Z_i. *)
Lemma hstop_mass s w : w <= 1 -> hstop s w * (zmass s w + (1 - w)) = zmass s w.
Proof.
move=> w1; rewrite /hstop; set Z := zmass s w.
have Z0 : 0 <= Z by apply: zmass_ge0.
have d0 : 0 <= 1 - w by rewrite subr_ge0.
case: ifP => [dpos|/negbT].
  have -> : minr 1 (Z / (Z + (1 - w))) = Z / (Z + (1 - w)).
    apply: min_r; rewrite ler_pdivr_mulr // mul1r.
    by rewrite ler_addl.
  by rewrite mulrVK // unitfE lt0r_neq0.
rewrite -leNgt => dle0.
have dz : Z + (1 - w) = 0 by apply/eqP; rewrite eq_le dle0 addr_ge0.
rewrite dz mulr0; apply/esym/eqP.
by rewrite eq_le Z0 andbT -dz ler_addl.
Qed.

(* The survival identity (proofs/v5_block.md section 1): P(tau >= i | x_{<=i}) = w_i. *)
Theorem block_survival g s w : 0 <= w <= 1 -> surv g s w = w.
Proof.
elim: g s w => [//|g IH] s w /andP[w0 w1] /=.
have -> : \sum_x q s x * surv g (rcons s x) (wnext s w x) = w - zmass s w.
  rewrite -sum_q_wnext //; apply: eq_bigr => x _.
  by rewrite IH // wnext_ge0 // wnext_le1.
have -> : 1 - (w - zmass s w) = zmass s w + (1 - w) by ring.
by rewrite hstop_mass // subrK.
Qed.

(* The residual's mass is exactly the probability of stopping: P(tau = i | x_{<=i}) = Z_i. *)
Lemma stop_prob_zmass g s w : 0 <= w <= 1 -> stop_prob g s w = zmass s w.
Proof.
move=> /andP[w0 w1]; rewrite /stop_prob.
have -> : \sum_x q s x * surv g (rcons s x) (wnext s w x) = w - zmass s w.
  rewrite -sum_q_wnext //; apply: eq_bigr => x _.
  by rewrite block_survival // wnext_ge0 // wnext_le1.
have -> : 1 - (w - zmass s w) = zmass s w + (1 - w) by ring.
exact: hstop_mass.
Qed.

(* Z rho(y) = max(0, w p(y) - q(y)), also when Z = 0 (then the fallback has weight 0). *)
Lemma stop_rho s w y : zmass s w * rho s w y = maxr 0 (w * p s y - q s y).
Proof.
rewrite /rho; case: eqP => [z0|/eqP zn0].
  rewrite z0 mul0r; apply/esym.
  by apply: (pos_sum_eq0 (F := fun x => maxr 0 (w * p s x - q s x))) => // x;
     apply: pos_part_ge0.
by rewrite mulrCA divff // mulr1.
Qed.

(* One step (proofs/v5_block.md section 2), conditional on the drafts x_{<=i} that led to s
   with weight w = w_i: P(tau >= i, y_{i+1} = y | x_{<=i}) = w_i p_{i+1}(y). *)
Theorem block_next_law g s w y : 0 <= w <= 1 -> block_next g s w y = w * p s y.
Proof.
move=> /andP[w0 w1]; case: g => [//|g] /=.
rewrite block_survival ?wnext_ge0 ?wnext_le1 // q_wnext //.
rewrite stop_prob_zmass ?w0 // stop_rho.
exact: min_plus_pos.
Qed.

(* From the start of a step: the drafts xs (|xs| <= gamma), their probability Q = prod q, and
   the weight w_{|xs|} along them. *)
Fixpoint draft_prob (s xs : seq T) : rat :=
  if xs is x :: xs' then q s x * draft_prob (rcons s x) xs' else 1.
Fixpoint weight (s xs : seq T) (w : rat) : rat :=
  if xs is x :: xs' then weight (rcons s x) xs' (wnext s w x) else w.

(* P(x_{<=i} = xs, tau >= i) and P(x_{<=i} = xs, tau >= i, y_{i+1} = y), i = |xs|. *)
Definition block_reach s xs :=
  draft_prob s xs * surv (gamma - size xs) (s ++ xs) (weight s xs 1).
Definition block_emit s xs y :=
  draft_prob s xs * block_next (gamma - size xs) (s ++ xs) (weight s xs 1) y.

Lemma weight_range s xs w : 0 <= w <= 1 -> 0 <= weight s xs w <= 1.
Proof.
elim: xs s w => [//|x xs IH] s w /andP[w0 _] /=.
by apply: IH; rewrite wnext_ge0 // wnext_le1.
Qed.

(* proofs/v5_block.md sections 1-2 from the start of a step: the emitted prefix is xs with
   probability Q(xs) w_{|xs|}, and the next emitted token then has the law p(. | s ++ xs). *)
Theorem block_reach_weight s xs : block_reach s xs = draft_prob s xs * weight s xs 1.
Proof.
by rewrite /block_reach block_survival // weight_range // ler01 lexx.
Qed.

Theorem block_step_lossless s xs y : block_emit s xs y = block_reach s xs * p (s ++ xs) y.
Proof.
rewrite /block_emit block_next_law ?weight_range ?ler01 ?lexx //.
by rewrite block_reach_weight mulrA.
Qed.

(* The stream. block_stream ys g s w = P(tau >= i and the next emitted tokens are ys | x_{<=i})
   at position i = gamma - g with tokens s and weight w; after tau the next step starts at
   position 0 with weight 1 and fresh randomness. *)
Fixpoint block_stream (ys : seq T) (g : nat) (s : seq T) (w : rat) : rat :=
  match ys, g with
  | [::], _ => surv g s w
  | y :: ys', 0 => w * p s y * block_stream ys' gamma (rcons s y) 1
  | y :: ys', g'.+1 =>
      q s y * block_stream ys' g' (rcons s y) (wnext s w y)
      + stop_prob g' s w * rho s w y * block_stream ys' gamma (rcons s y) 1
  end.

Theorem block_stream_state_lossless ys g s w :
  0 <= w <= 1 -> block_stream ys g s w = w * target p s ys.
Proof.
elim: ys g s w => [|y ys IH] g s w wr.
  by rewrite mulr1; exact: block_survival.
case: g => [|g] /=.
  by rewrite IH ?ler01 ?lexx // mul1r mulrA.
have wr' : 0 <= wnext s w y <= 1.
  by case/andP: wr => w0 _; rewrite wnext_ge0 // wnext_le1.
rewrite !IH ?ler01 ?lexx // mul1r stop_prob_zmass // stop_rho mulrA q_wnext;
  last by case/andP: wr.
by rewrite -mulrDl min_plus_pos mulrA.
Qed.

(* Every finite sequence of tokens is emitted next, from the start of a step, with the target's
   autoregressive probability. *)
Theorem block_stream_lossless s ys : block_stream ys gamma s 1 = target p s ys.
Proof. by rewrite block_stream_state_lossless ?ler01 ?lexx // mul1r. Qed.

End Block.
