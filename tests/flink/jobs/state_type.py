"""The example job whose per-day state holds text instead of two integers: the same uid, a
state of another type, which fails when the job reads it."""

from pathlib import Path

from pyflink.common import Duration, Encoder, Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import (
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from pyflink.datastream.state import ValueStateDescriptor

INPUT = Path("in/orders")
ORDER = Types.TUPLE([Types.STRING(), Types.STRING(), Types.LONG()])


def parse(line: str) -> tuple[str, str, int]:
    order_id, day, amount = line.strip().split(",")
    return order_id, day, int(amount)


class DayTotals(KeyedProcessFunction):  # type: ignore[misc]
    """Per day: the total and count of its orders so far."""

    def open(self, runtime_context: RuntimeContext) -> None:
        totals = ValueStateDescriptor("day_totals", Types.STRING())
        self.totals = runtime_context.get_state(totals)

    def process_element(self, order, ctx):  # type: ignore[no-untyped-def]
        order_id, day, amount = order
        total, count = map(int, (self.totals.value() or "0|0").split("|"))
        total, count = total + amount, count + 1
        self.totals.update(f"{total}|{count}")
        yield f"{order_id},{day},{amount},{total},{count}"


def build(env: StreamExecutionEnvironment, output: str) -> None:
    INPUT.mkdir(parents=True, exist_ok=True)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(INPUT.resolve()))
        .monitor_continuously(Duration.of_millis(200))
        .build()
    )
    orders = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "orders")
        .uid("orders-source")
        .filter(lambda line: bool(line.strip()))
        .uid("orders-lines")
        .map(parse, output_type=ORDER)
        .uid("orders-parse")
    )
    per_day = (
        orders.key_by(lambda order: order[1], key_type=Types.STRING())
        .process(DayTotals(), output_type=Types.STRING())
        .uid("day-totals")
    )
    sink = (
        FileSink.for_row_format(output, Encoder.simple_string_encoder())
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix("orders").with_part_suffix(".csv").build()
        )
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .build()
    )
    per_day.sink_to(sink).uid("orders-sink")
