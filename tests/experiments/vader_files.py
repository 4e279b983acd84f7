"""Tiny VADER corpora in the upstream format (``id<TAB>rating<TAB>text``),
written by the tests under ``<root>/vader/hutto_ICWSM_2014/``."""

POS = ["a great film", "the cast was great fun", "a moving story of love"]
NEG = ["a terrible movie", "dull plot and bad acting", "the music was awful"]


def write_vader(root, n=15):
  d = root / "vader" / "hutto_ICWSM_2014"
  d.mkdir(parents=True)
  rows = [
    f"{i}\t{1.5 if i % 2 else -1.5}\t{(POS if i % 2 else NEG)[i % 3]} {i}"
    for i in range(2 * n)
  ]
  (d / "movieReviewSnippets_GroundTruth.txt").write_text("\n".join(rows))
  public = [
    f"p{i}\t{(-1) ** i}\t{['great', 'awful'][i % 2]} stuff {i}"
    for i in range(12)
  ]
  (d / "amazonReviewSnippets_GroundTruth.txt").write_text("\n".join(public))
  (d / "tweets_GroundTruth.txt").write_text("t1\t2.0\tlove it\nt2\t-2.0\tugh")
