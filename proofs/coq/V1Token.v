(* V1 token-level speculative sampling is lossless (proofs/v1_token_level.md).
   Mirrors docs/verifiers.md V1 as implemented in core/verify/verify_chain.cpp (accept test
   token_accepts and residual weight residual_fixed in core/base/rules.hpp, leniency 1). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
From Speclab Require Import Dist.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory Num.Def Order.TTheory.
Local Open Scope ring_scope.

(* ------------------------------------------------------------------------------------------
   One position: target row p, draft row q. *)
Section OnePosition.

Variable T : finType.
Variables p q : T -> rat.

(* Accept a drafted x with probability min(1, p(x)/q(x)); never when q(x) = 0. *)
Definition accept x := ratio (p x) (q x).

(* Residual weight max(0, p - q) (residual_fixed with leniency 1) and its mass. *)
Definition resid y := maxr 0 (p y - q y).
Definition resid_mass := \sum_y resid y.

(* The normalised residual; speclab samples p instead when the residual has no mass
   (counted as residual_fallback). *)
Definition residual y := if resid_mass == 0 then p y else resid y / resid_mass.

(* Probability that the drafted token is rejected. *)
Definition reject_mass := \sum_x q x * (1 - accept x).

(* Law of the emitted token: drafted and accepted, or rejected and drawn from the residual. *)
Definition v1_emit y := q y * accept y + reject_mass * residual y.

Hypothesis p_dist : is_dist p.
Hypothesis q_dist : is_dist q.

Lemma drafted_accepted y : q y * accept y = minr (q y) (p y).
Proof. by rewrite mul_ratio //; [case: p_dist | case: q_dist]. Qed.

(* The residual's mass is exactly the rejection probability. *)
Lemma reject_mass_resid : reject_mass = resid_mass.
Proof.
rewrite /reject_mass /resid_mass.
have -> : \sum_x q x * (1 - accept x) = \sum_x (q x - minr (q x) (p x)).
  by apply: eq_bigr => x _; rewrite -drafted_accepted mulrBr mulr1.
have -> : \sum_y resid y = \sum_y (p y - minr (q y) (p y)).
  by apply: eq_bigr => y _; apply/eqP; rewrite eq_sym subr_eq addrC min_plus_pos.
by rewrite !sumrB; case: p_dist => _ ->; case: q_dist => _ ->.
Qed.

Theorem v1_token_law y : v1_emit y = p y.
Proof.
rewrite /v1_emit drafted_accepted reject_mass_resid /residual.
case: eqP => [m0|/eqP mn0].
  have r0 : resid y = 0.
    by apply: (pos_sum_eq0 (F := resid)) => // x; apply: pos_part_ge0.
  by rewrite m0 mul0r addr0 -[RHS](min_plus_pos (p y) (q y)) -/(resid y) r0 addr0.
by rewrite mulrCA divff // mulr1 min_plus_pos.
Qed.

(* The fallback is reached with probability 0: when the residual has no mass, so does the
   rejection. *)
Theorem v1_fallback_unreachable : resid_mass = 0 -> reject_mass = 0.
Proof. by rewrite reject_mass_resid. Qed.

End OnePosition.

(* ------------------------------------------------------------------------------------------
   A step of gamma positions with rows depending on the prefix. p s and q s are the target's
   and the draft's next-token laws after the tokens s (context and tokens so far). *)
Section Chain.

Variable T : finType.
Variables p q : seq T -> T -> rat.
Hypothesis p_dist : forall s, is_dist (p s).
Hypothesis q_dist : forall s, is_dist (q s).

(* Probability that a step with g draft positions left after s drafts xs and accepts all of
   xs. *)
Fixpoint v1_reach (g : nat) (s xs : seq T) : rat :=
  match xs, g with
  | [::], _ => 1
  | x :: xs', g'.+1 => q s x * accept (p s) (q s) x * v1_reach g' (rcons s x) xs'
  | _ :: _, 0 => 0
  end.

(* Probability that the step drafts and accepts xs and then emits y as its next token:
   the next draft accepted, or the residual at the first rejection, or the bonus token from
   p after the last draft. *)
Fixpoint v1_next (g : nat) (s xs : seq T) (y : T) : rat :=
  match xs, g with
  | [::], 0 => p s y
  | [::], _.+1 => v1_emit (p s) (q s) y
  | x :: xs', g'.+1 => q s x * accept (p s) (q s) x * v1_next g' (rcons s x) xs' y
  | _ :: _, 0 => 0
  end.

(* Theorem 1 of proofs/v1_token_level.md: after every accepted prefix xs the next emitted
   token has the target's law given s ++ xs. *)
Theorem v1_step_lossless g s xs y :
  v1_next g s xs y = v1_reach g s xs * p (s ++ xs) y.
Proof.
elim: xs g s => [|x xs IH] [|g] s /=; rewrite ?cats0 ?mul1r ?mul0r //.
  by rewrite v1_token_law.
by rewrite IH cat_rcons mulrA.
Qed.

(* The stream. gamma drafts per step; after a residual or bonus token a new step starts with
   fresh randomness. v1_stream ys g s is the probability that the next emitted tokens are ys
   when the current step has g draft positions left after the tokens s. *)
Variable gamma : nat.

Fixpoint v1_stream (ys : seq T) (g : nat) (s : seq T) : rat :=
  match ys, g with
  | [::], _ => 1
  | y :: ys', 0 => p s y * v1_stream ys' gamma (rcons s y)
  | y :: ys', g'.+1 =>
      q s y * accept (p s) (q s) y * v1_stream ys' g' (rcons s y)
      + reject_mass (p s) (q s) * residual (p s) (q s) y * v1_stream ys' gamma (rcons s y)
  end.

(* Theorem 2 of proofs/v1_token_level.md: from any state, and in particular from the start of a
   step (g = gamma), every finite sequence of next tokens has the target's autoregressive
   probability. *)
Theorem v1_stream_state_lossless ys g s : v1_stream ys g s = target p s ys.
Proof.
elim: ys g s => [|y ys IH] [|g] s //=; rewrite !IH //.
by rewrite -mulrDl -/(v1_emit (p s) (q s) y) (v1_token_law (p_dist s) (q_dist s)).
Qed.

Theorem v1_stream_lossless s ys : v1_stream ys gamma s = target p s ys.
Proof. exact: v1_stream_state_lossless. Qed.

End Chain.
