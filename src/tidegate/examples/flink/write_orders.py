"""Write order files into in/orders/, as an upstream system would: `python write_orders.py
[FILES] [ORDERS_PER_FILE]`. Each file is written under a hidden name, then renamed, so the job
never reads half a file. Prints the orders and the amount written so far in all."""

import sys
from pathlib import Path

INPUT = Path(__file__).parent / "in" / "orders"
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    per_file = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    INPUT.mkdir(parents=True, exist_ok=True)
    written = sorted(INPUT.glob("orders-*.csv"))
    orders = sum(len(f.read_text().split()) for f in written)
    for number in range(len(written) + 1, len(written) + files + 1):
        lines = []
        for _ in range(per_file):
            orders += 1
            lines.append(f"o{orders},{DAYS[orders % len(DAYS)]},{orders * 7 % 100 + 1}")
        hidden = INPUT / f".orders-{number:05d}.csv"
        hidden.write_text("\n".join(lines) + "\n")
        hidden.rename(INPUT / f"orders-{number:05d}.csv")
    total = sum(
        int(line.split(",")[2])
        for f in INPUT.glob("orders-*.csv")
        for line in f.read_text().split()
    )
    print(f"{orders} orders, amount {total}")


if __name__ == "__main__":
    main()
