"""Student submissions the grader tests share (pytest puts this folder on sys.path: ``from ring_submissions import GOOD``)."""

# a correct a1 answer: ring reduce_scatter, n-1 steps, each rank reducing into its right neighbour
GOOD = '''from sim.chunk_program import ChunkProgram
def ring_reduce_scatter(nranks):
    n = nranks
    p = ChunkProgram("reduce_scatter", n, chunks=n)
    r = p.ranks
    for s in p.steps(n - 1):
        p.send(r, r + 1, chunk=r - s - 1, reduce=True)
    return p.program("my_ring", steps=n - 1)
'''
