"""smartnoise-synth MST / AIM on our public domain.

Every column is handed over already coded (ints ``0..size-1`` from :mod:`scoring`) as a
categorical column.  snsynth's ``LabelTransformer`` would otherwise take each column's
categories from the data (not private, and unseen categories vanish), so we fit the
transformers on a *public* frame that lists every code of every column; the transformer
then maps code ``i`` to label ``i`` and the peer's domain is exactly the schema's.

Run in ``.venvs/snsynth`` (smartnoise-synth 1.0.8 with its pinned ``mbi`` 1.1.0) or in
``.venvs/mbi2`` (the same smartnoise-synth code installed ``--no-deps`` over ``mbi`` 2.0.0).
smartnoise draws its Gaussian noise from OpenDP (not seedable); ``--seed`` seeds numpy's
global generator, which it uses for selection and sampling.
"""

from __future__ import annotations

import time

import _common
import numpy as np
import pandas as pd


def main() -> None:
    args = _common.parse(["mst", "aim", "mst-iid"])
    schema, codes, sizes = _common.load(args)
    np.random.seed(args.seed)
    from snsynth.transform.label import LabelTransformer
    from snsynth.transform.table import TableTransformer

    names = [c["name"] for c in schema]
    width = max(sizes)
    public = pd.DataFrame({n: np.arange(width) % s for n, s in zip(names, sizes, strict=True)})
    tt = TableTransformer([LabelTransformer(nullable=False) for _ in names])
    tt.fit(public)
    assert tt.cardinality == sizes, (tt.cardinality, sizes)
    data = pd.DataFrame(codes, columns=names)

    t0 = time.perf_counter()
    if args.peer == "mst-iid":
        # mbi 1.1.0's synthetic_data defaults to method="round" (randomized rounding), whose rows
        # match the model on measured cliques but not on pairs joined only through the tree;
        # its method="sample" draws rows i.i.d. from the model.
        import functools

        from mbi import MarkovRandomField

        MarkovRandomField.synthetic_data = functools.partialmethod(
            MarkovRandomField.synthetic_data, method="sample")
    if args.peer in ("mst", "mst-iid"):
        from snsynth.mst import MSTSynthesizer

        synth = MSTSynthesizer(epsilon=args.epsilon, delta=args.delta)
    else:
        from snsynth.aim import AIMSynthesizer

        # The reference AIM run used the all-3-way workload; snsynth's default is degree 2.
        synth = AIMSynthesizer(epsilon=args.epsilon, delta=args.delta, degree=3)
    synth.fit(data, transformer=tt, categorical_columns=names, preprocessor_eps=0.0)
    out = synth.sample(len(codes))
    seconds = time.perf_counter() - t0

    out = np.asarray(pd.DataFrame(out, columns=names).to_numpy(), dtype=np.int64)
    version = _common.versions("smartnoise-synth", "mbi")
    # Not timed: a second draw from the fitted model, to check the sampler against the model.
    model = synth.synthesizer
    gap = _common.sampler_gap(model, model.synthetic_data(rows=len(codes)), list(model.domain.attrs))
    _common.finish(args, schema, out, args.peer, version, seconds, **gap)


if __name__ == "__main__":
    main()
