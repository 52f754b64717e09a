(* Gumbel-coupled verification equals plain decoding, pathwise (proofs/match_verifiers.md §1).
   Mirrors the verifier `coupled` (core/verify/verify_match.cpp, MatchMethod::kCoupled): the
   target's token at output position t is
   pick(p(. | prefix), G_t) (argmax of log p + Gumbel noise G_t); the draft drafts with the
   same noise; verification keeps drafts while they equal the target's token and emits the
   target's token at the first mismatch, or a bonus token after gamma matches.
   Nothing here is probabilistic: pick is any function, the noise any values, and the drafts
   any tokens at all, so the statement holds for every realisation of the noise. *)
From mathcomp Require Import all_ssreflect.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Section Coupled.

Variables (T : eqType) (Row Noise : Type).
Variable pick : Row -> Noise -> T.          (* e.g. argmax_v (log row(v) + noise(v)) *)
Variable p : seq T -> Row.                  (* the target's row after the tokens s *)
Variable G : nat -> Noise.                  (* the noise of output position t *)

(* Plain decoding with rows r: n tokens from output position t after the tokens s. *)
Fixpoint decode (r : seq T -> Row) (s : seq T) (t n : nat) : seq T :=
  if n is n'.+1 then let y := pick (r s) (G t) in y :: decode r (rcons s y) t.+1 n'
  else [::].

Definition plain := decode p.

(* One verification step from output position t after the tokens s, drafts ds. *)
Fixpoint verify (s : seq T) (t : nat) (ds : seq T) : seq T :=
  let y := pick (p s) (G t) in
  if ds is d :: ds' then (if d == y then y :: verify (rcons s y) t.+1 ds' else [:: y])
  else [:: y].

Lemma size_decode r s t n : size (decode r s t n) = n.
Proof. by elim: n s t => [|n IH] s t //=; rewrite IH. Qed.

Lemma decode_cat r s t m n :
  decode r s t (m + n) = decode r s t m ++ decode r (s ++ decode r s t m) (t + m) n.
Proof.
elim: m s t => [|m IH] s t /=; first by rewrite cats0 addn0.
by rewrite IH cat_rcons addSnnS.
Qed.

(* One step: for any drafts, the step emits exactly the first n+1 tokens of plain decoding,
   n <= |ds| (n is the number of drafts kept). *)
Theorem coupled_step s t ds :
  exists2 n, n <= size ds & verify s t ds = plain s t n.+1.
Proof.
elim: ds s t => [|d ds IH] s t /=; first by exists 0.
case: eqP => _; last by exists 0.
have [n le_n ->] := IH (rcons s (pick (p s) (G t))) t.+1.
by exists n.+1.
Qed.

(* Repeated steps. draft k s t: the drafts of step k after the tokens s at output position t,
   any function at all (adversarial drafts included). *)
Variable draft : nat -> seq T -> nat -> seq T.

(* The tokens emitted by steps k0 .. k0+k-1; each step starts at the next output position. *)
Fixpoint run (k k0 : nat) (s : seq T) (t : nat) : seq T :=
  if k is k'.+1 then
    let e := verify s t (draft k0 s t) in e ++ run k' k0.+1 (s ++ e) (t + size e)
  else [::].

(* The whole stream is plain decoding's stream: after k steps, exactly its first
   |run| >= k tokens. *)
Theorem coupled_stream k k0 s t :
  run k k0 s t = plain s t (size (run k k0 s t)) /\ k <= size (run k k0 s t).
Proof.
elim: k k0 s t => [|k IH] k0 s t; first by [].
rewrite /=; have [n _ ->] := coupled_step s t (draft k0 s t).
rewrite /plain size_decode; set R := run k k0.+1 _ _.
have [eR le_k] : R = decode p (s ++ decode p s t n.+1) (t + n.+1) (size R) /\ k <= size R.
  by have := IH k0.+1 (s ++ decode p s t n.+1) (t + n.+1); rewrite /plain.
rewrite size_cat size_decode; split.
  by rewrite {1}eR -decode_cat.
by rewrite addSn ltnS (leq_trans le_k) // leq_addl.
Qed.

End Coupled.

(* The Gumbel-coupled verifier's own drafts: plain decoding of the draft's rows q with the same
   noise G, from the draft's prefix (the accepted context), gamma tokens per step. An instance
   of the arbitrary drafts above. *)
Corollary coupled_stream_gumbel_draft (T : eqType) (Row Noise : Type)
    (pick : Row -> Noise -> T) (p q : seq T -> Row) (G : nat -> Noise) (gamma k : nat)
    (s : seq T) (t : nat) :
  let r := run pick p G (fun _ s' t' => decode pick G q s' t' gamma) k 0 s t in
  r = plain pick p G s t (size r) /\ k <= size r.
Proof. exact: coupled_stream. Qed.

(* V2 greedy verification (proofs/v2_greedy.md, core/verify/verify_chain.cpp kGreedy) is the
   case without noise: pick = the argmax with speclab's tie rule (any function of the row),
   so V2's stream is plain greedy decoding whatever the drafts. *)
Corollary greedy_stream (T : eqType) (Row : Type) (argmax : Row -> T) (p : seq T -> Row)
    (draft : nat -> seq T -> nat -> seq T) (k : nat) (s : seq T) (t : nat) :
  let pick := fun (row : Row) (_ : unit) => argmax row in
  let r := run pick p (fun _ => tt) draft k 0 s t in
  r = plain pick p (fun _ => tt) s t (size r) /\ k <= size r.
Proof. exact: coupled_stream. Qed.
