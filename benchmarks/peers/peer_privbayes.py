"""DataSynthesizer's PrivBayes (correlated attribute mode, k = 2) on our public domain.

Each column is handed over coded as strings ``v0 .. v{size-1}`` (missing is its own code),
declared categorical, with a ``categorical_attribute_domain_file`` that lists every code:
DataSynthesizer's domain is then the schema's, not the values seen in the data.

Budget: DataSynthesizer 0.1.13 spends ``epsilon / 2`` on the network and ``epsilon / 2`` on
the conditionals; its correlated mode *also* runs the independent mode first, which puts
Laplace noise with the same ``epsilon`` on 1-way histograms that go into the description
file but are not used to generate rows.  We pass ``epsilon`` as given (the rows depend on
the data through the ``epsilon``-DP network part only).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import _common
import numpy as np
import pandas as pd


def main() -> None:
    args = _common.parse(["privbayes"])
    schema, codes, sizes = _common.load(args)
    from DataSynthesizer.DataDescriber import DataDescriber
    from DataSynthesizer.DataGenerator import DataGenerator

    names = [c["name"] for c in schema]
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        coded = pd.DataFrame({n: np.char.add("v", codes[:, j].astype(str)) for j, n in enumerate(names)})
        coded.to_csv(tmpd / "in.csv", index=False)
        (tmpd / "domain.json").write_text(
            json.dumps({n: [f"v{i}" for i in range(s)] for n, s in zip(names, sizes, strict=True)})
        )
        t0 = time.perf_counter()
        desc = DataDescriber(category_threshold=max(sizes) + 1)
        desc.describe_dataset_in_correlated_attribute_mode(
            dataset_file=str(tmpd / "in.csv"),
            epsilon=args.epsilon,
            k=2,
            attribute_to_datatype={n: "String" for n in names},
            attribute_to_is_categorical={n: True for n in names},
            attribute_to_is_candidate_key={n: False for n in names},
            categorical_attribute_domain_file=str(tmpd / "domain.json"),
            seed=args.seed,
        )
        desc.save_dataset_description_to_file(str(tmpd / "desc.json"))
        gen = DataGenerator()
        gen.generate_dataset_in_correlated_attribute_mode(len(codes), str(tmpd / "desc.json"), seed=args.seed)
        seconds = time.perf_counter() - t0
        syn = gen.synthetic_dataset[names]

    out = np.stack([syn[n].astype(str).str.slice(1).astype(np.int64).to_numpy() for n in names], axis=1)
    _common.finish(args, schema, out, "privbayes", _common.versions("DataSynthesizer"), seconds)


if __name__ == "__main__":
    main()
