"""A few KB of public-domain English used to train the tiny model's tokenizer.

Sources (all in the public domain): the Gettysburg Address (1863), the preamble of the
US Declaration of Independence (1776), the opening of Genesis (King James Version, 1611),
Aesop's fables in Townsend's translation (1867), and lines of Shakespeare's sonnets.
The text only needs to give a byte-level BPE realistic English merges; its content is
irrelevant to the benchmarks.
"""

from __future__ import annotations

_PASSAGES = (
    """Four score and seven years ago our fathers brought forth on this continent, a new
nation, conceived in Liberty, and dedicated to the proposition that all men are created
equal. Now we are engaged in a great civil war, testing whether that nation, or any nation
so conceived and so dedicated, can long endure. We are met on a great battle-field of that
war. We have come to dedicate a portion of that field, as a final resting place for those
who here gave their lives that that nation might live. It is altogether fitting and proper
that we should do this. But, in a larger sense, we can not dedicate, we can not consecrate,
we can not hallow this ground. The brave men, living and dead, who struggled here, have
consecrated it, far above our poor power to add or detract. The world will little note, nor
long remember what we say here, but it can never forget what they did here. It is for us
the living, rather, to be dedicated here to the unfinished work which they who fought here
have thus far so nobly advanced. It is rather for us to be here dedicated to the great task
remaining before us, that from these honored dead we take increased devotion to that cause
for which they gave the last full measure of devotion, that we here highly resolve that
these dead shall not have died in vain, that this nation, under God, shall have a new birth
of freedom, and that government of the people, by the people, for the people, shall not
perish from the earth.""",
    """When in the Course of human events, it becomes necessary for one people to dissolve the
political bands which have connected them with another, and to assume among the powers of
the earth, the separate and equal station to which the Laws of Nature and of Nature's God
entitle them, a decent respect to the opinions of mankind requires that they should declare
the causes which impel them to the separation. We hold these truths to be self-evident,
that all men are created equal, that they are endowed by their Creator with certain
unalienable Rights, that among these are Life, Liberty and the pursuit of Happiness. That
to secure these rights, Governments are instituted among Men, deriving their just powers
from the consent of the governed.""",
    """In the beginning God created the heaven and the earth. And the earth was without form,
and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the
face of the waters. And God said, Let there be light: and there was light. And God saw the
light, that it was good: and God divided the light from the darkness. And God called the
light Day, and the darkness he called Night. And the evening and the morning were the first
day. And God said, Let there be a firmament in the midst of the waters, and let it divide
the waters from the waters.""",
    """A Hare one day ridiculed the short feet and slow pace of the Tortoise, who replied,
laughing: "Though you be swift as the wind, I will beat you in a race." The Hare, believing
her assertion to be simply impossible, assented to the proposal; and they agreed that the
Fox should choose the course and fix the goal. On the day appointed for the race the two
started together. The Tortoise never for a moment stopped, but went on with a slow but
steady pace straight to the end of the course. The Hare, lying down by the wayside, fell
fast asleep. At last waking up, and moving as fast as he could, he saw the Tortoise had
reached the goal, and was comfortably dozing after her fatigue. Slow but steady wins the
race.""",
    """A Crow perishing with thirst saw a pitcher, and hoping to find water, flew to it with
delight. When he reached it, he discovered to his grief that it contained so little water
that he could not possibly get at it. He tried everything he could think of to reach the
water, but all his efforts were in vain. At last he collected as many stones as he could
carry and dropped them one by one with his beak into the pitcher, until he brought the water
within his reach and thus saved his life. Necessity is the mother of invention.""",
    """A Lion lay asleep in the forest, his great head resting on his paws. A timid little
Mouse came upon him unexpectedly, and in her fright and haste to get away, ran across the
Lion's nose. Roused from his nap, the Lion laid his huge paw angrily on the tiny creature to
kill her. "Spare me!" begged the poor Mouse. "Please let me go and some day I will surely
repay you." The Lion was much amused to think that a Mouse could ever help him. But he was
generous and finally let the Mouse go.""",
    """Shall I compare thee to a summer's day? Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May, And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines, And often is his gold complexion dimm'd; And every
fair from fair sometime declines, By chance or nature's changing course untrimm'd; But thy
eternal summer shall not fade, Nor lose possession of that fair thou owest; Nor shall Death
brag thou wander'st in his shade, When in eternal lines to time thou growest: So long as men
can breathe or eyes can see, So long lives this, and this gives life to thee.""",
)

_NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million"
)


def corpus() -> list[str]:
    """The training texts: the passages, number words, digits and a little code-like text."""
    digits = " ".join(str(i) for i in range(0, 1000, 7))
    code = "def main(): return {'key': [1, 2, 3], \"value\": None} # comment\n" * 3
    return [*_PASSAGES, _NUMBERS, digits, code]
