"""FSDP × TP on the page, driven by AppTest: a link with a tensor-parallel degree runs a 2 × 2 mesh of real processes
and its Mesh tab draws the ranks, their groups and their shares; FSDP alone has no Mesh tab."""
import json

from test_app import page, show_tab
from test_app_engines import shown_text


def test_a_link_with_a_tensor_parallel_degree_opens_and_draws_the_mesh():
    app = page(engine="fsdp", tp="2", gpus="4", train="true")
    assert not app.exception
    assert app.number_input(key="tp").value == 2 and app.query_params["tp"] == "2"
    assert "using model = 'ffn'" in shown_text(app)  # the tutorial's Linear has no plan: fitted, said in one sentence
    labels = [t.label for t in app.tabs]
    assert "Mesh" in labels
    show_tab(app, "Mesh")
    assert not app.exception
    specs = [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]
    mesh = next(spec for spec in specs if "The mesh" in spec["layout"]["title"]["text"])
    assert "2 dp_shard × 2 tp = 4 ranks" in mesh["layout"]["title"]["text"]
    written = " ".join(a["text"] for a in mesh["layout"]["annotations"])
    assert all(f"<b>rank {r}</b>" in written for r in range(4)) and "1/4 of net.0.weight" in written
    drawn = {trace.get("legendgroup") for trace in mesh["data"]}
    assert {"all-reduce", "all-gather", "reduce-scatter"} <= drawn  # both groups' collectives, as the ranks ran them


def test_fsdp_alone_has_no_mesh_tab():
    app = page(engine="fsdp", gpus="2", train="true")
    assert not app.exception and app.number_input(key="tp").value == 1
    assert "Mesh" not in [t.label for t in app.tabs]
