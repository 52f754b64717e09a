(* Finite distributions over rationals and the facts the verifier proofs share.
   A distribution on a finite token type T is a function T -> rat, non-negative and summing
   to 1 (mathcomp's rat: exact arithmetic, decidable equality and order, no axioms). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory Num.Def Order.TTheory.
Local Open Scope ring_scope.

Section Dist.

Variable T : finType.

Definition is_dist (p : T -> rat) := (forall x, 0 <= p x) /\ \sum_x p x = 1.

(* min(1, a/b), and 0 when b = 0: the accept probability of a drafted token whose draft
   probability is b (core/base/rules.hpp token_accepts: a token with q(x) = 0 is never
   accepted). *)
Definition ratio (a b : rat) : rat := if b == 0 then 0 else minr 1 (a / b).

Lemma ratio_ge0 a b : 0 <= a -> 0 <= b -> 0 <= ratio a b.
Proof.
move=> a0 b0; rewrite /ratio; case: eqP => // _.
by rewrite le_minr ler01 divr_ge0.
Qed.

Lemma ratio_le1 a b : ratio a b <= 1.
Proof. by rewrite /ratio; case: eqP => _; rewrite ?ler01 // le_minl lexx. Qed.

(* b * min(1, a/b) = min(b, a): the probability of drafting and accepting a token. *)
Lemma mul_ratio a b : 0 <= a -> 0 <= b -> b * ratio a b = minr b a.
Proof.
move=> a0 b0; rewrite /ratio; case: eqP => [->|/eqP bn0].
  by rewrite mul0r; apply/esym/min_l.
by rewrite minr_pmulr // mulr1 mulrCA divff // mulr1.
Qed.

(* a = min(a, b) + max(0, a - b), with the arguments in the order the proofs use. *)
Lemma min_plus_pos (a b : rat) : minr b a + maxr 0 (a - b) = a.
Proof.
case: (lerP a b) => ab.
  by rewrite max_l ?addr0 // subr_le0.
by rewrite max_r ?subr_ge0 ?ltW // addrC subrK.
Qed.

Lemma pos_part_ge0 (a : rat) : 0 <= maxr 0 a.
Proof. by rewrite le_maxr lexx. Qed.

(* A sum of non-negative terms is 0 only if every term is. *)
Lemma pos_sum_eq0 (F : T -> rat) y :
  (forall x, 0 <= F x) -> \sum_x F x = 0 -> F y = 0.
Proof.
move=> F0 /eqP; rewrite psumr_eq0 => [/allP /(_ y) |x _ //].
by rewrite mem_index_enum => /(_ isT) /implyP /(_ isT) /eqP.
Qed.

End Dist.

Section Target.

Variable T : finType.

(* Target rows given the prefix: p s is the next-token law after the tokens s (the context
   and everything emitted so far). *)
Variable p : seq T -> T -> rat.

(* The target's autoregressive law of the next tokens ys after s: the product of its rows.
   Plain decoding emits ys with this probability. *)
Fixpoint target (s : seq T) (ys : seq T) : rat :=
  if ys is y :: ys' then p s y * target (rcons s y) ys' else 1.

End Target.
